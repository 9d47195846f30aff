"""Fakes for unit tests of the request path: a clock whose sleeps advance it at once."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from proxy.clock import Clock


@dataclass
class FakeClock:
    """Starts at `t`; `sleep(s)` moves it s seconds on (after letting other tasks run) and notes
    the sleep, so back-offs and deadlines are exact and cost no real time."""

    t: float = 1000.0
    slept: list[float] = field(default_factory=list)

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.t += seconds
        await asyncio.sleep(0)

    @property
    def clock(self) -> Clock:
        return Clock(now=self.now, sleep=self.sleep)
