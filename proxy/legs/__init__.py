"""Where a request can go: the team's own engines (one aiohttp session, the backend registry and
its load probes, breakers) and cloud targets (litellm at the boundary, the body allow-list),
behind one Leg protocol (leg.py). Add an engine kind or a cloud kind here."""
