"""Time as a dependency: the request path asks a Clock for the time and for its sleeps, so unit
tests drive retries, back-offs and deadlines with a fake one, in microseconds and exactly."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Clock:
    now: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
