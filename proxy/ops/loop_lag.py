"""How late the event loop wakes up: the operators' view of a stalled proxy.

Every request shares one event loop; anything that holds it (a long computation, a blocking
call, a garbage-collection pass over millions of objects) delays every stream at once. A task
asks to wake after a fixed interval and records how much later it woke, as the histogram
`overspill_event_loop_lag_seconds` on /metrics. Its own cost: one wake-up per interval.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

INTERVAL_S = 0.25
LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class Observes(Protocol):
    def observe(self, amount: float) -> None: ...


async def watch_lag(lag: Observes, interval_s: float = INTERVAL_S) -> None:
    """Records each wake-up's delay past `interval_s`, until cancelled."""
    loop = asyncio.get_running_loop()
    while True:
        asked = loop.time() + interval_s
        await asyncio.sleep(interval_s)
        lag.observe(max(0.0, loop.time() - asked))
