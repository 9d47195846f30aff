"""Just enough of the Prometheus text format to read an engine's load gauges (pure)."""

from __future__ import annotations

import re

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{[^}]*\})?\s+(\S+)")


def sample_values(text: str, names: set[str]) -> dict[str, list[float]]:
    """Every value of each wanted metric, across label sets (engines, models)."""
    found: dict[str, list[float]] = {}
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        match = _SAMPLE.match(line)
        if match and match.group(1) in names:
            try:
                found.setdefault(match.group(1), []).append(float(match.group(2)))
            except ValueError:
                continue
    return found
