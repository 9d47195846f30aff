"""What operators and admins read: /metrics, the per-request log line, the dashboard's recent
traffic, `overspill check` and `overspill explain` (the same plan the live path makes)."""
