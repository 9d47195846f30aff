"""Fakes for unit tests of the request path: a clock whose sleeps advance it at once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
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


async def until(condition: Callable[[], bool], what: str, turns: int = 10_000) -> None:
    """Let the other tasks run until `condition` holds: a unit test waits for an event of the
    code under test, never for time (bounded, so a condition that never comes fails the test)."""
    for _ in range(turns):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"never happened: {what}")
