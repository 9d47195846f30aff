"""`overspill serve --demo` and `overspill demo traffic`: simulated engines and a cloud behind
the proxy, and a realistic request mix to watch it work."""
