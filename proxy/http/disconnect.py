"""Notice a client that went away while we wait, not only when we next write to it.

Starlette's StreamingResponse and plain handlers only see a disconnect on their next `send`. A
request waiting for an engine's first token (or for a queue, a retry back-off, a cold model load)
would keep the engine busy for nobody. `DisconnectWatch` reads `receive()` in a task of its own
and, on `http.disconnect`, cancels the task serving the request; leaving the `async with` block
then swallows that cancellation, so the caller's `finally` clauses release what it held.
"""

from __future__ import annotations

import asyncio
from types import TracebackType

from starlette.types import Receive


class DisconnectWatch:
    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self._task: asyncio.Task[object] | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._finished = False
        self.disconnected = False

    def finish(self) -> None:
        """The response is complete: a disconnect from now on is the normal end of it."""
        self._finished = True

    async def __aenter__(self) -> DisconnectWatch:
        self._task = asyncio.current_task()
        self._watcher = asyncio.get_running_loop().create_task(self._watch())
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        assert self._watcher is not None
        assert self._task is not None
        self._watcher.cancel()
        task = self._task
        # The cancelled watcher's error holds its frame, which holds this watch, which held the
        # request's task: a cycle that kept every request's objects alive until a full garbage
        # collection (hundreds of ms with thousands of streams open). Broken here.
        self._watcher = self._task = None
        if kind is asyncio.CancelledError and self.disconnected:
            task.uncancel()
            return True
        return False

    async def _watch(self) -> None:
        while (await self._receive())["type"] != "http.disconnect":
            pass
        if not self._finished and self._task is not None:
            self.disconnected = True
            self._task.cancel()
