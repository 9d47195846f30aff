"""The routing policy admins write, and the pure decisions made from it."""
