"""proxy/http/disconnect.py: a request's objects are freed when it ends, without waiting for a
garbage-collection pass (a cycle through the cancelled watcher held them: with thousands of
streams open, each full pass stalled the loop for hundreds of ms), and a client that leaves
still cancels the request's work."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Callable, Iterator
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


class Line:
    """Stands for our uvicorn protocol as a Connection (proxy/http/connection.py)."""

    def __init__(self, lost: bool = False) -> None:
        self.lost = lost
        self.departures: set[Callable[[], object]] = set()

    def body_arrived(self) -> bool:
        return True

    def on_lost(self, departure: Callable[[], object]) -> bool:
        if self.lost:
            return False
        self.departures.add(departure)
        return True

    def forget(self, departure: Callable[[], object]) -> None:
        self.departures.discard(departure)

    def lose(self) -> None:
        self.lost = True
        for departure in list(self.departures):
            departure()


async def never_read() -> dict[str, Any]:
    raise AssertionError("told by the connection: receive() is not read")


async def test_told_by_the_connection_a_departure_cancels_the_work_with_no_task() -> None:
    line = Line()

    async def request() -> bool:
        async with DisconnectWatch(never_read, line) as watch:
            asyncio.get_running_loop().call_soon(line.lose)
            await asyncio.Event().wait()  # an engine that would never answer
        return watch.disconnected

    tasks_before = len(asyncio.all_tasks())
    served = asyncio.get_running_loop().create_task(request())
    await asyncio.sleep(0)
    assert len(asyncio.all_tasks()) == tasks_before + 1  # the request's own, no watcher
    assert await asyncio.wait_for(served, 10)
    assert line.departures == set()


async def test_a_connection_lost_before_the_request_was_served_cancels_it_at_once() -> None:
    async def request() -> bool:
        async with DisconnectWatch(never_read, Line(lost=True)) as watch:
            await asyncio.Event().wait()
        return watch.disconnected

    assert await asyncio.wait_for(request(), 10)


async def test_a_loss_after_the_answer_is_the_normal_end_and_nothing_is_kept() -> None:
    line = Line()
    async with DisconnectWatch(never_read, line) as watch:
        watch.finish()
        line.lose()
        await asyncio.sleep(0)  # not cancelled: the block goes on
    assert not watch.disconnected
    assert line.departures == set()
