"""Notice a client that went away while we wait, not only when we next write to it.

Starlette's StreamingResponse and plain handlers only see a disconnect on their next `send`. A
request waiting for an engine's first token (or for a queue, a retry back-off, a cold model load)
would keep the engine busy for nobody. `DisconnectWatch` cancels the task serving the request
when its client's connection is lost: told so by our uvicorn protocol (proxy/http/connection.py)
at no cost, or, under another server, by `receive()` read in a task of its own. Leaving the
`async with` block then swallows that cancellation, so the caller's `finally` clauses release
what it held.
"""

from __future__ import annotations

import asyncio
from types import TracebackType

from starlette.types import Receive

from proxy.http.connection import Connection


class DisconnectWatch:
    def __init__(self, receive: Receive, connection: Connection | None = None) -> None:
        self._receive = receive
        self._connection = connection
        self._task: asyncio.Task[object] | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._finished = False
        self.disconnected = False

    def finish(self) -> None:
        """The response is complete: a disconnect from now on is the normal end of it."""
        self._finished = True

    async def __aenter__(self) -> DisconnectWatch:
        self._task = asyncio.current_task()
        if self._connection is None:
            self._watcher = asyncio.get_running_loop().create_task(self._watch())
        elif not self._connection.on_lost(self._left):
            self._left()  # gone before the request was served
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        assert self._task is not None
        if self._watcher is not None:
            self._watcher.cancel()
        if self._connection is not None:
            self._connection.forget(self._left)
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
        self._left()

    def _left(self) -> None:
        if not self._finished and self._task is not None:
            self.disconnected = True
            self._task.cancel()
