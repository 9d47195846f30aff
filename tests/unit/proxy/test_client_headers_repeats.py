"""proxy/http/client_headers.py: a header repeated many times is joined once, as HTTP defines.
Joined as they came, every repeat copied the text joined so far: 256,000 repeats of one header
(4.9 MB) held the event loop for over a minute. The head's limits (proxy/http/head_deadline.py,
tests/unit/proxy/test_head_limits.py) now stop such a head before it is read, and the join is
one pass in any case (a timing ratio would prove it only on a quiet machine: not asserted)."""

from __future__ import annotations

from proxy.http.client_headers import client_headers


def test_repeats_are_joined_in_order_with_the_other_headers_kept() -> None:
    raw = [(b"x-overspill-privacy", f"level-{n}".encode()) for n in range(40_000)]
    raw.insert(7, (b"X-Request-ID", b"r-1"))
    resolved = client_headers(raw)
    assert resolved["x-overspill-privacy"] == ", ".join(f"level-{n}" for n in range(40_000))
    assert resolved["x-request-id"] == "r-1"
