"""proxy/http/disconnect.py: a request's objects are freed when it ends, without waiting for a
garbage-collection pass (a cycle through the cancelled watcher held them: with thousands of
streams open, each full pass stalled the loop for hundreds of ms), and a client that leaves
still cancels the request's work."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from proxy.http.disconnect import DisconnectWatch


class RequestState:
    """Stands for uvicorn's request cycle: its receive() is what the watch reads, and it holds
    the request's scope, transport and buffers."""

    async def receive(self) -> dict[str, Any]:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


@pytest.fixture
def no_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def test_a_finished_request_is_freed_by_reference_counting_alone(no_collector: None) -> None:
    async def request() -> weakref.ref[RequestState]:
        state = RequestState()
        async with DisconnectWatch(state.receive) as watch:
            await asyncio.sleep(0)  # the watcher starts waiting on receive()
            watch.finish()
        return weakref.ref(state)

    held = await asyncio.get_running_loop().create_task(request())
    for _ in range(3):  # the cancelled watcher runs to its end
        await asyncio.sleep(0)
    assert held() is None


async def test_a_client_that_leaves_cancels_the_work_and_the_block_ends_quietly() -> None:
    left = asyncio.Event()

    async def receive() -> dict[str, Any]:
        await left.wait()
        return {"type": "http.disconnect"}

    reached_the_end = False

    async def request() -> bool:
        nonlocal reached_the_end
        async with DisconnectWatch(receive) as watch:
            left.set()
            await asyncio.Event().wait()  # an engine that would never answer
            reached_the_end = True
        return watch.disconnected

    assert await asyncio.wait_for(request(), 10)
    assert not reached_the_end
