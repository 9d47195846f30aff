"""Where a request can go: the team's own engines (one aiohttp session, the backend registry and
its load probes, breakers) and cloud targets (litellm at the boundary, the body allow-list).
The request path reaches both through one Leg protocol (proxy/flow/legs.py). Add an engine kind
or a cloud kind here."""
