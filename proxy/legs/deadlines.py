"""Time limits on awaits, kept by one watchdog instead of a timer each.

`asyncio.timeout` arms a loop timer on entry and cancels it on exit: measured here, 6 us per use,
more than the proxy's own work on some requests, and a stream took one per chunk. A `Limit` only
notes its task and due time in a dict; the `Deadlines` watchdog looks at the dict every `tick_s`
while it is not empty, and cancels the task of a limit past due, which the limit turns into
`TimeoutError` as `asyncio.timeout` does (an outer cancellation stays a cancellation). A limit
fires up to `tick_s` late: fine for limits of seconds.

A `Limit` is reusable: a stream's reader keeps one and waits for each chunk `within` it.
"""

from __future__ import annotations

import asyncio
from types import TracebackType

TICK_S = 0.05


class Deadlines:
    def __init__(self, tick_s: float = TICK_S) -> None:
        self.tick_s = tick_s
        self._watched: dict[Limit, float] = {}  # each limit in force, with its due loop time
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def limit(self) -> Limit:
        return Limit(self)

    def within(self, seconds: float | None) -> Limit:
        """A new limit of `seconds` (None: none) for a `with` block."""
        return Limit(self).within(seconds)

    def _watch(self, limit: Limit, due: float, loop: asyncio.AbstractEventLoop) -> None:
        self._watched[limit] = due
        if self._timer is None or self._loop is not loop:
            self._loop = loop
            self._timer = loop.call_later(self.tick_s, self._check)

    def _forget(self, limit: Limit) -> None:
        self._watched.pop(limit, None)

    def _check(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        late = [limit for limit, due in self._watched.items() if due <= now]
        for limit in late:
            del self._watched[limit]
            limit.expire()
        self._timer = loop.call_later(self.tick_s, self._check) if self._watched else None


class Limit:
    """A time limit on the awaits inside `with limit.within(seconds):`."""

    __slots__ = ("_cancelling", "_deadlines", "_expired", "_seconds", "_task")

    def __init__(self, deadlines: Deadlines) -> None:
        self._deadlines = deadlines
        self._seconds: float | None = None
        self._task: asyncio.Task[object] | None = None
        self._cancelling = 0
        self._expired = False

    def within(self, seconds: float | None) -> Limit:
        self._seconds = seconds
        return self

    def __enter__(self) -> Limit:
        if self._seconds is None:
            return self
        task = asyncio.current_task()
        assert task is not None, "a Limit is used inside a task"
        self._task, self._cancelling, self._expired = task, task.cancelling(), False
        loop = task.get_loop()
        self._deadlines._watch(self, loop.time() + self._seconds, loop)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        if not self._expired:
            self._deadlines._forget(self)
            return
        # As asyncio.timeout: the cancellation was ours unless another came on top of it.
        if task.uncancel() <= self._cancelling and kind is asyncio.CancelledError:
            raise TimeoutError from error

    def expire(self) -> None:
        if self._task is not None and not self._expired:
            self._expired = True
            self._task.cancel()
