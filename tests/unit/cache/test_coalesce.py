"""cache/coalesce.py: one upstream call per key in flight, its chunks fanned out to all."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest

from cache.coalesce import Coalescer

KEY = "exact-key"
CHUNKS = [b"data: one\n\n", b"data: two\n\n", b"data: three\n\n", b"data: [DONE]\n\n"]


class Boom(RuntimeError):
    pass


@dataclass
class Upstream:
    """A scripted producer: each call streams `script` (an exception in it is raised there),
    waiting at the index of a held gate until the test opens it."""

    script: list[bytes | Exception] = field(default_factory=lambda: list(CHUNKS))
    fail_head: Exception | None = None
    head_gate: asyncio.Event | None = None
    holds: dict[int, asyncio.Event] = field(default_factory=dict)
    calls: int = 0
    closed: int = 0  # streams whose finally ran
    cancelled: int = 0  # streams or heads cut by a cancellation
    heads_abandoned: int = 0

    async def produce(self) -> tuple[str, AsyncIterator[bytes]]:
        self.calls += 1
        try:
            if self.head_gate is not None:
                await self.head_gate.wait()
        except asyncio.CancelledError:
            self.heads_abandoned += 1
            raise
        if self.fail_head is not None:
            raise self.fail_head
        return f"head-{self.calls}", self.stream()

    async def stream(self) -> AsyncIterator[bytes]:
        try:
            for index, item in enumerate(self.script):
                if index in self.holds:
                    await self.holds[index].wait()
                if isinstance(item, Exception):
                    raise item
                yield item
        except (asyncio.CancelledError, GeneratorExit):
            self.cancelled += 1
            raise
        finally:
            self.closed += 1


async def ride(
    coalescer: Coalescer[str], upstream: Upstream, got: list[bytes] | None = None
) -> tuple[str, list[bytes]]:
    """A passenger: the head and every chunk (appended to `got` as they come)."""
    got = [] if got is None else got
    async with coalescer.board(KEY, upstream.produce) as flight:
        head = await flight.wait_head()
        async for chunk in flight.follow():
            got.append(chunk)
    return head, got


async def until(condition: Callable[[], bool], steps: int = 200) -> None:
    for _ in range(steps):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never became true")


async def test_one_passenger_gets_the_head_and_every_chunk() -> None:
    coalescer: Coalescer[str] = Coalescer()
    upstream = Upstream()
    assert await ride(coalescer, upstream) == ("head-1", CHUNKS)
    assert upstream.calls == 1
    assert (coalescer.started, coalescer.joined) == (1, 0)


async def test_concurrent_passengers_share_one_upstream_call() -> None:
    coalescer: Coalescer[str] = Coalescer()
    upstream = Upstream()
    results = await asyncio.gather(*(ride(coalescer, upstream) for _ in range(10)))
    assert upstream.calls == 1
    assert all(result == ("head-1", CHUNKS) for result in results)
    assert (coalescer.started, coalescer.joined) == (1, 9)
    assert upstream.cancelled == 0


async def test_different_keys_fly_separately() -> None:
    coalescer: Coalescer[str] = Coalescer()
    upstream = Upstream()

    async def ride_key(key: str) -> list[bytes]:
        async with coalescer.board(key, upstream.produce) as flight:
            await flight.wait_head()
            return [chunk async for chunk in flight.follow()]

    results = await asyncio.gather(ride_key("a"), ride_key("b"), ride_key("a"))
    assert list(results) == [CHUNKS] * 3
    assert upstream.calls == 2
    assert (coalescer.started, coalescer.joined) == (2, 1)


async def test_a_late_passenger_gets_every_chunk_from_the_first() -> None:
    coalescer: Coalescer[str] = Coalescer()
    hold = asyncio.Event()
    upstream = Upstream(holds={2: hold})
    early: list[bytes] = []
    first = asyncio.create_task(ride(coalescer, upstream, early))
    await until(lambda: len(early) == 2)
    late = asyncio.create_task(ride(coalescer, upstream))
    await until(lambda: coalescer.joined == 1)
    hold.set()
    assert await first == ("head-1", CHUNKS)
    assert await late == ("head-1", CHUNKS)
    assert upstream.calls == 1
    assert (coalescer.started, coalescer.joined) == (1, 1)


async def test_an_error_before_the_head_reaches_every_passenger() -> None:
    coalescer: Coalescer[str] = Coalescer()
    gate = asyncio.Event()
    upstream = Upstream(fail_head=Boom("connect refused"), head_gate=gate)
    rides = [asyncio.create_task(ride(coalescer, upstream)) for _ in range(5)]
    await until(lambda: coalescer.joined == 4)
    gate.set()
    results = await asyncio.gather(*rides, return_exceptions=True)
    assert all(isinstance(r, Boom) and str(r) == "connect refused" for r in results)
    assert upstream.calls == 1
    assert KEY not in coalescer.flights


async def test_an_error_midway_reaches_every_passenger_after_the_chunks_so_far() -> None:
    coalescer: Coalescer[str] = Coalescer()
    gate = asyncio.Event()
    upstream = Upstream(script=[*CHUNKS[:2], Boom("engine died")], head_gate=gate)
    received: list[list[bytes]] = [[] for _ in range(4)]
    rides = [asyncio.create_task(ride(coalescer, upstream, got)) for got in received]
    await until(lambda: coalescer.joined == 3)
    gate.set()
    results = await asyncio.gather(*rides, return_exceptions=True)
    assert all(isinstance(r, Boom) for r in results)
    assert received == [CHUNKS[:2]] * 4
    assert upstream.calls == 1


async def test_a_passenger_joining_after_an_error_midway_gets_the_chunks_and_the_error() -> None:
    coalescer: Coalescer[str] = Coalescer()
    hold = asyncio.Event()
    upstream = Upstream(script=[*CHUNKS[:2], Boom("engine died")], holds={2: hold})
    first_got: list[bytes] = []
    first = asyncio.create_task(ride(coalescer, upstream, first_got))
    await until(lambda: len(first_got) == 2)
    late_got: list[bytes] = []
    late = asyncio.create_task(ride(coalescer, upstream, late_got))
    await until(lambda: late_got == CHUNKS[:2])
    hold.set()
    for task in (first, late):
        with pytest.raises(Boom):
            await task
    assert late_got == CHUNKS[:2]


async def test_when_every_passenger_leaves_the_upstream_stream_is_closed() -> None:
    coalescer: Coalescer[str] = Coalescer()
    upstream = Upstream(holds={1: asyncio.Event()})  # never opened: the stream stalls

    async def leave_after_one_chunk() -> bytes:
        async with coalescer.board(KEY, upstream.produce) as flight:
            await flight.wait_head()
            async for chunk in flight.follow():
                return chunk
        raise AssertionError("no chunk")

    left = await asyncio.gather(leave_after_one_chunk(), leave_after_one_chunk())
    assert list(left) == [CHUNKS[0]] * 2
    await until(lambda: upstream.closed == 1)
    assert upstream.cancelled == 1
    await until(lambda: KEY not in coalescer.flights)


async def test_when_every_passenger_leaves_before_the_head_the_call_is_cancelled() -> None:
    coalescer: Coalescer[str] = Coalescer()
    upstream = Upstream(head_gate=asyncio.Event())  # the head never comes
    rides = [asyncio.create_task(ride(coalescer, upstream)) for _ in range(3)]
    await until(lambda: upstream.calls == 1 and coalescer.joined == 2)
    for task in rides:
        task.cancel()  # the clients disconnect
    results = await asyncio.gather(*rides, return_exceptions=True)
    assert all(isinstance(r, asyncio.CancelledError) for r in results)
    await until(lambda: upstream.heads_abandoned == 1)
    await until(lambda: KEY not in coalescer.flights)


async def test_when_one_of_two_leaves_the_flight_goes_on_for_the_other() -> None:
    coalescer: Coalescer[str] = Coalescer()
    hold = asyncio.Event()
    upstream = Upstream(holds={1: hold})
    staying_got: list[bytes] = []
    staying = asyncio.create_task(ride(coalescer, upstream, staying_got))
    async with coalescer.board(KEY, upstream.produce) as flight:
        await flight.wait_head()
        async for chunk in flight.follow():
            assert chunk == CHUNKS[0]
            break
    for _ in range(10):
        await asyncio.sleep(0)
    assert upstream.cancelled == 0
    assert not flight.done
    hold.set()
    assert await staying == ("head-1", CHUNKS)
    assert upstream.cancelled == 0
    assert upstream.closed == 1


async def test_a_cancelled_passenger_does_not_cut_the_others_off() -> None:
    coalescer: Coalescer[str] = Coalescer()
    hold = asyncio.Event()
    upstream = Upstream(holds={2: hold})
    leaving_got: list[bytes] = []
    leaving = asyncio.create_task(ride(coalescer, upstream, leaving_got))
    staying = asyncio.create_task(ride(coalescer, upstream))
    await until(lambda: len(leaving_got) == 2)
    leaving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leaving
    hold.set()
    assert await staying == ("head-1", CHUNKS)
    assert upstream.cancelled == 0


async def test_a_finished_flight_is_removed_and_the_next_starts_a_new_one() -> None:
    coalescer: Coalescer[str] = Coalescer()
    upstream = Upstream()
    assert await ride(coalescer, upstream) == ("head-1", CHUNKS)
    await until(lambda: KEY not in coalescer.flights)
    assert await ride(coalescer, upstream) == ("head-2", CHUNKS)
    assert upstream.calls == 2
    assert (coalescer.started, coalescer.joined) == (2, 0)


async def test_a_failed_flight_is_removed_and_the_next_starts_a_new_one() -> None:
    coalescer: Coalescer[str] = Coalescer()
    upstream = Upstream(fail_head=Boom("down"))
    with pytest.raises(Boom):
        await ride(coalescer, upstream)
    await until(lambda: KEY not in coalescer.flights)
    upstream.fail_head = None
    assert await ride(coalescer, upstream) == ("head-2", CHUNKS)


async def test_a_flight_done_but_not_yet_removed_is_not_joined() -> None:
    coalescer: Coalescer[str] = Coalescer()
    upstream = Upstream()
    async with coalescer.board(KEY, upstream.produce) as flight:
        await flight.wait_head()
        assert [c async for c in flight.follow()] == CHUNKS
        assert flight.done
        coalescer.flights[KEY] = flight  # as if its task had not cleaned up yet
        assert await ride(coalescer, upstream) == ("head-2", CHUNKS)
    assert (coalescer.started, coalescer.joined) == (2, 0)


async def test_boarding_right_after_everyone_left_gets_a_whole_answer() -> None:
    coalescer: Coalescer[str] = Coalescer()
    hold = asyncio.Event()
    upstream = Upstream(holds={1: hold})
    async with coalescer.board(KEY, upstream.produce) as flight:
        await flight.wait_head()
        async for _ in flight.follow():
            break
    got: list[bytes] = []  # no await between the last passenger leaving and this one boarding
    async with coalescer.board(KEY, upstream.produce) as flight:
        hold.set()
        await flight.wait_head()
        async for chunk in flight.follow():
            got.append(chunk)
    assert got == CHUNKS


async def test_a_flight_left_before_it_started_does_not_block_the_key() -> None:
    coalescer: Coalescer[str] = Coalescer()
    upstream = Upstream()
    async with coalescer.board(KEY, upstream.produce):
        pass  # the client left at once
    for _ in range(10):
        await asyncio.sleep(0)
    assert await asyncio.wait_for(ride(coalescer, upstream), 0.5) == ("head-1", CHUNKS)
