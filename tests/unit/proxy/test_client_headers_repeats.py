"""proxy/http/client_headers.py: a header repeated many times costs time in proportion to the
repeats. Joined as they came, every repeat copied the text joined so far: 256,000 repeats of one
header (4.9 MB) held the event loop for over a minute. The head's limits (proxy/http/
head_deadline.py) now stop such a head before it is read, and the join stays linear in any
case."""

from __future__ import annotations

import time

from proxy.http.client_headers import client_headers


def cost(repeats: int) -> float:
    """The CPU time this process spends resolving one header repeated `repeats` times (the
    best of three: a pause of the machine's own makes a run longer, never shorter)."""
    raw = [(b"x-overspill-privacy", b"public")] * repeats
    runs = []
    for _ in range(3):
        start = time.process_time()
        resolved = client_headers(raw)
        runs.append(time.process_time() - start)
    assert resolved["x-overspill-privacy"] == ", ".join(["public"] * repeats)
    return min(runs)


def test_eight_times_the_repeats_cost_about_eight_times_as_much() -> None:
    """A ratio of this machine's times, not a time: linear is 8, quadratic about 64 (over 150
    measured here on the old join)."""
    assert cost(40_000) < 24 * cost(5_000)
