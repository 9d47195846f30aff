"""The event loop's lag (proxy/ops/loop_lag.py): a loop held by blocking work shows as a late
wake-up at least as long as the hold, less the interval asked for."""

from __future__ import annotations

import asyncio
import time

from proxy.ops.loop_lag import watch_lag


class Seen(list[float]):
    def observe(self, amount: float) -> None:
        self.append(amount)


async def test_a_loop_held_by_blocking_work_wakes_late_by_about_the_hold() -> None:
    seen = Seen()
    watcher = asyncio.create_task(watch_lag(seen, interval_s=0.01))
    try:
        await asyncio.sleep(0)  # the watcher asks for its first wake-up
        time.sleep(0.2)  # holds the loop: the wake-up comes at least 0.19 s late
        for _ in range(1_000):
            if seen:
                break
            await asyncio.sleep(0.01)
        assert seen[0] >= 0.19
        assert all(lag >= 0 for lag in seen)
    finally:
        watcher.cancel()
