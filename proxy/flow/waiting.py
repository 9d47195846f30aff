"""The waiting room: requests that may only use a local engine, while every local one is
saturated, wait here (not in an engine's queue) and are let in by urgency.

Per public model, one dispatcher lets in the most urgent waiter that would now find a usable
local backend (a request finished, or a probe saw the load fall), then waits until that one is
counted in flight before it looks again, so it never lets in more than there is room for. A
class's rank and the time waited make the urgency (policies/priority). A waiter that cannot go
(too large for the room there is, or its class's share is full) does not hold up a less urgent
one that can; it keeps its place and goes as soon as it fits, or meets its max_wait_s. A
request whose predicted wait exceeds its class's max_wait_s is refused on arrival (429); one
that waits that long all the same is refused then (503); one whose client leaves is simply gone
from the queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from policies.priority import predicted_wait, urgency
from proxy.errors import Overloaded, RateLimited

DRAIN_WINDOW_S = 30.0  # how far back the drain rate looks
TICK_S = 0.05  # also look this often: probes change the load without any request ending
HANDOVER_S = 2.0  # at most this long for a released waiter to be counted in flight


@dataclass(eq=False)
class Turn:
    """A waiter let in: it says when it is counted in flight (or gave up), so that the next one
    is considered only then."""

    done: asyncio.Event = field(default_factory=asyncio.Event)

    def taken(self) -> None:
        self.done.set()


@dataclass(frozen=True)
class Ask:
    """What a request waits with. `group` and `size` let a pass skip asking: within a group
    (what else a waiter's readiness depends on: its class, its privacy level), a request of more
    tokens never fits where a smaller one did not."""

    model: str
    priority: str
    rank: int
    max_wait_s: float
    aging_s: float
    size: int = 0  # tokens
    group: Hashable = ()


@dataclass(eq=False)
class _Waiter:
    ask: Ask
    arrived: float
    ready: Callable[[], bool]  # would it find a usable local backend now?
    turn: asyncio.Future[Turn]


class WaitingRoom:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._queues: dict[str, list[_Waiter]] = {}
        self._wakes: dict[str, asyncio.Event] = {}
        self._dispatchers: dict[str, asyncio.Task[None]] = {}
        self._starts: dict[str, deque[float]] = {}
        self.refused = 0  # predicted waits too long, at arrival
        self.timed_out = 0  # waited max_wait_s after all

    def waiting(self, model: str) -> int:
        return len(self._queues.get(model, ()))

    def models(self) -> list[str]:
        """The models that ever had a queue (for the metrics: their gauges stay, at zero)."""
        return sorted(self._queues)

    def started(self, model: str) -> None:
        """A request for `model` got a local engine (waited or not): the drain rate's data."""
        starts = self._starts.setdefault(model, deque())
        now = self.clock()
        starts.append(now)
        while starts and starts[0] < now - DRAIN_WINDOW_S:
            starts.popleft()

    def drain_rate(self, model: str) -> float | None:
        """Requests per second that got a local engine over the last window (None: too few)."""
        starts = self._starts.get(model)
        now = self.clock()
        while starts and starts[0] < now - DRAIN_WINDOW_S:
            starts.popleft()
        if not starts or len(starts) < 2:
            return None
        span = max(self.clock() - starts[0], starts[-1] - starts[0], 1e-3)
        return len(starts) / span

    def wake(self) -> None:
        """Something finished: every dispatcher looks again at once."""
        for event in self._wakes.values():
            event.set()

    async def wait(self, ask: Ask, ready: Callable[[], bool]) -> Turn:
        queue = self._queues.setdefault(ask.model, [])
        now = self.clock()
        ahead = sum(1 for w in queue if self._urgency(w, now, ask.aging_s) <= ask.rank)
        rate = self.drain_rate(ask.model)
        predicted = predicted_wait(ahead, rate)
        if predicted is not None and predicted > ask.max_wait_s:
            self.refused += 1
            raise RateLimited(
                f"the local engines for model {ask.model!r} are saturated and {ahead} requests "
                f"of priority {ask.priority!r} or higher wait before this one: predicted wait "
                f"{predicted:.1f} s > max_wait_s {ask.max_wait_s:g}",
                retry_after=predicted - ask.max_wait_s,
                code="queue_full",
                limit="max_wait_s",
            )
        waiter = _Waiter(ask, now, ready, asyncio.get_running_loop().create_future())
        queue.append(waiter)
        self._ensure_dispatcher(ask.model, ask.aging_s)
        try:
            return await asyncio.wait_for(asyncio.shield(waiter.turn), ask.max_wait_s)
        except BaseException as leaving:
            self._hand_back(waiter)  # let in just as it timed out or its client left
            if not isinstance(leaving, TimeoutError):
                raise
            self.timed_out += 1
            rate = self.drain_rate(ask.model)
            retry = predicted_wait(self.waiting(ask.model), rate) or ask.max_wait_s
            raise Overloaded(
                f"waited {ask.max_wait_s:g} s (max_wait_s of priority {ask.priority!r}) for a "
                f"local engine for model {ask.model!r}: they stayed saturated",
                code="queue_timeout",
                headers={"Retry-After": str(max(1, round(retry)))},
            ) from None
        finally:
            if waiter in queue:
                queue.remove(waiter)

    @staticmethod
    def _hand_back(waiter: _Waiter) -> None:
        if not waiter.turn.done():
            waiter.turn.cancel()  # the dispatcher skips it
        elif not waiter.turn.cancelled():
            waiter.turn.result().taken()  # let in, but gone: the next one may go

    def _urgency(self, waiter: _Waiter, now: float, aging_s: float) -> float:
        return urgency(waiter.ask.rank, now - waiter.arrived, aging_s)

    def _ensure_dispatcher(self, model: str, aging_s: float) -> None:
        self._wakes.setdefault(model, asyncio.Event()).set()
        task = self._dispatchers.get(model)
        if task is None or task.done():
            self._dispatchers[model] = asyncio.create_task(self._dispatch(model, aging_s))

    async def _dispatch(self, model: str, aging_s: float) -> None:
        queue, wake = self._queues[model], self._wakes[model]
        while queue:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), TICK_S)
            wake.clear()
            while (chosen := self._most_urgent_ready(queue, aging_s)) is not None:
                queue.remove(chosen)
                turn = Turn()
                chosen.turn.set_result(turn)  # the request counts itself as started in flight
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(turn.done.wait(), HANDOVER_S)

    def _most_urgent_ready(self, queue: list[_Waiter], aging_s: float) -> _Waiter | None:
        """In order of urgency, the first waiter that would find room now; waiters whose client
        left or who timed out are dropped on the way."""
        now = self.clock()
        unfit: dict[Hashable, int] = {}  # per group, the smallest size found not ready
        for waiter in sorted(queue, key=lambda w: (self._urgency(w, now, aging_s), w.arrived)):
            if waiter.turn.done():
                queue.remove(waiter)
                continue
            group, size = waiter.ask.group, waiter.ask.size
            if size >= unfit.get(group, size + 1):
                continue  # a smaller one of its group did not fit: neither would this one
            if waiter.ready():
                return waiter
            unfit[group] = size
        return None

    async def close(self) -> None:
        for task in self._dispatchers.values():
            task.cancel()
        await asyncio.gather(*self._dispatchers.values(), return_exceptions=True)
