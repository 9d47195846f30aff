"""proxy/flow/waiting.py: the waiting room, with plain asyncio code (no proxy process).

The room's clock is a fake one, so urgencies (aging) and drain rates are exact; the timeouts
(max_wait_s, the dispatcher's tick, the handover) are real time. No test asserts how long
anything took: a waiter whose timeout is not the point gets one longer than any wait here, and
"at once" means "not on a timer", shown by making the timer too long to reach.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest

from proxy.errors import Overloaded, RateLimited
from proxy.flow import waiting
from proxy.flow.waiting import Ask, Turn, WaitingRoom
from tests.fakes import FakeClock
from tests.waits import DEADLINE_S

INTERACTIVE, BATCH = 0, 1
# A max_wait_s that does not run out while a test runs: the waiter leaves when the test says.
PATIENT_S = 10 * DEADLINE_S
# Longer than any test waits: a turn that only a tick or the handover timeout would give is
# never given.
NEVER_S = 10 * DEADLINE_S
NAMES = {INTERACTIVE: "interactive", BATCH: "batch"}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(t=0.0)


@pytest.fixture
async def room(clock: FakeClock) -> AsyncIterator[WaitingRoom]:
    room = WaitingRoom(clock.now)
    yield room
    await room.close()


def ask(rank: int = INTERACTIVE, max_wait_s: float = PATIENT_S, aging_s: float = 1000.0) -> Ask:
    return Ask("m", NAMES[rank], rank, max_wait_s, aging_s)


def never() -> bool:
    return False


def always() -> bool:
    return True


async def until(condition: Callable[[], bool], within_s: float = DEADLINE_S) -> None:
    """Poll `condition`; `within_s` only bounds a hang."""
    for _ in range(round(within_s / 0.005)):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"not so within {within_s} s")


async def cancel(*tasks: asyncio.Task[Turn]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def set_drain_rate(room: WaitingRoom, clock: FakeClock) -> None:
    """Two starts one second apart, read at the second: 2 requests per second."""
    clock.t = 0.0
    room.started("m")
    clock.t = 1.0
    room.started("m")
    assert room.drain_rate("m") == pytest.approx(2.0)


@dataclass
class Engine:
    """Local engines with `free` slots: a waiter let in takes one, uses it, and gives it back."""

    free: int
    order: list[str] = field(default_factory=list)
    holders: int = 0
    most: int = 0
    least_free: int = 1_000

    def ready(self) -> bool:
        return self.free > 0

    async def use(
        self, room: WaitingRoom, name: str, asked: Ask, take_after: float = 0.0, hold: float = 0.01
    ) -> None:
        turn = await room.wait(asked, self.ready)
        self.order.append(name)
        if take_after:
            await asyncio.sleep(take_after)  # counted in flight only now
        self.free -= 1
        self.holders += 1
        self.most = max(self.most, self.holders)
        self.least_free = min(self.least_free, self.free)
        turn.taken()
        await asyncio.sleep(hold)
        self.holders -= 1
        self.free += 1
        room.wake()


# (a) a ready waiter


async def test_a_waiter_that_would_find_a_usable_backend_gets_a_turn_at_once(
    room: WaitingRoom, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(waiting, "TICK_S", NEVER_S)  # let in on arrival, not on the next tick
    turn = await asyncio.wait_for(room.wait(ask(), always), DEADLINE_S)
    assert isinstance(turn, Turn)
    turn.taken()
    assert room.waiting("m") == 0
    assert (room.refused, room.timed_out) == (0, 0)


async def test_an_unknown_model_has_nobody_waiting_and_no_drain_rate(room: WaitingRoom) -> None:
    assert room.waiting("nothing") == 0
    assert room.drain_rate("nothing") is None


async def test_a_waiter_waits_until_it_would_find_a_usable_backend(room: WaitingRoom) -> None:
    engine = Engine(free=0)
    task = asyncio.create_task(room.wait(ask(), engine.ready))
    await until(lambda: room.waiting("m") == 1)
    await asyncio.sleep(0.15)  # a few dispatcher ticks
    assert not task.done()
    engine.free = 1
    room.wake()
    turn = await asyncio.wait_for(task, DEADLINE_S)
    turn.taken()
    assert room.waiting("m") == 0


# (b) classes


async def test_an_interactive_waiter_goes_before_an_earlier_batch_one(
    room: WaitingRoom, clock: FakeClock
) -> None:
    engine = Engine(free=0)
    tasks = [asyncio.create_task(engine.use(room, f"batch{i}", ask(BATCH))) for i in (1, 2)]
    await until(lambda: room.waiting("m") == 2)
    clock.t = 1.0
    tasks += [
        asyncio.create_task(engine.use(room, f"interactive{i}", ask(INTERACTIVE))) for i in (1, 2)
    ]
    await until(lambda: room.waiting("m") == 4)
    engine.free = 1
    room.wake()
    await asyncio.wait_for(asyncio.gather(*tasks), DEADLINE_S)
    assert engine.order == ["interactive1", "interactive2", "batch1", "batch2"]
    assert engine.most == 1
    assert room.waiting("m") == 0


async def test_waiters_of_one_class_go_in_order_of_arrival(
    room: WaitingRoom, clock: FakeClock
) -> None:
    engine = Engine(free=0)
    tasks = []
    for i in range(4):
        clock.t = float(i)
        tasks.append(asyncio.create_task(engine.use(room, f"w{i}", ask(BATCH))))
        await until(lambda: room.waiting("m") == len(tasks))
    engine.free = 1
    room.wake()
    await asyncio.wait_for(asyncio.gather(*tasks), DEADLINE_S)
    assert engine.order == ["w0", "w1", "w2", "w3"]


# (c) aging


@pytest.mark.parametrize(
    ("interactive_arrives", "released_at", "order"),
    [
        (0.5, 0.5, ["interactive", "batch"]),  # the batch one waited half an aging period
        (5.0, 5.0, ["batch", "interactive"]),  # ... five aging periods: lifted past it
        (0.0, 5.0, ["interactive", "batch"]),  # both waited as long: the class decides
    ],
    ids=["not aged enough", "aged past it", "aged alike"],
)
async def test_a_batch_waiter_that_waited_long_enough_goes_before_a_newer_interactive_one(
    room: WaitingRoom,
    clock: FakeClock,
    interactive_arrives: float,
    released_at: float,
    order: list[str],
) -> None:
    engine = Engine(free=0)
    batch = asyncio.create_task(engine.use(room, "batch", ask(BATCH, aging_s=1.0)))
    await until(lambda: room.waiting("m") == 1)
    clock.t = interactive_arrives
    urgent = asyncio.create_task(engine.use(room, "interactive", ask(INTERACTIVE, aging_s=1.0)))
    await until(lambda: room.waiting("m") == 2)
    clock.t = released_at
    engine.free = 1
    room.wake()
    await asyncio.wait_for(asyncio.gather(batch, urgent), DEADLINE_S)
    assert engine.order == order


# (d) never more than there is room for


async def test_the_dispatcher_never_lets_in_more_than_there_is_room_for(
    room: WaitingRoom,
) -> None:
    engine = Engine(free=2)
    tasks = [asyncio.create_task(engine.use(room, f"w{i}", ask(), hold=0.1)) for i in range(6)]
    await asyncio.wait_for(asyncio.gather(*tasks), DEADLINE_S)
    assert sorted(engine.order) == [f"w{i}" for i in range(6)]
    assert engine.most == 2  # both slots used, never a third
    assert engine.least_free == 0
    assert engine.free == 2


EARLY_TAKEN = (
    "BUG: wait()'s finally calls taken() on every turn it returns, not only on one whose waiter "
    "left, so the dispatcher moves on before the caller is counted in flight"
)


async def test_the_dispatcher_never_lets_in_more_than_there_is_room_for_even_if_taken_late(
    room: WaitingRoom, monkeypatch: pytest.MonkeyPatch
) -> None:
    # However late a turn is taken here, the handover timeout (a safety valve) never runs out.
    monkeypatch.setattr(waiting, "HANDOVER_S", NEVER_S)
    engine = Engine(free=2)
    tasks = [
        asyncio.create_task(engine.use(room, f"w{i}", ask(), take_after=0.05, hold=0.15))
        for i in range(6)
    ]
    await asyncio.wait_for(asyncio.gather(*tasks), DEADLINE_S)
    assert sorted(engine.order) == [f"w{i}" for i in range(6)]
    assert engine.most == 2  # both slots used, never a third
    assert engine.least_free == 0
    assert engine.free == 2


async def test_the_next_waiter_is_considered_only_once_the_last_one_is_taken(
    room: WaitingRoom, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(waiting, "HANDOVER_S", NEVER_S)  # only taken() lets the next one in
    first = asyncio.create_task(room.wait(ask(), always))
    second = asyncio.create_task(room.wait(ask(), always))
    turn = await asyncio.wait_for(first, DEADLINE_S)
    await asyncio.sleep(0.2)  # ready() says yes all along, but the first is not counted yet
    assert not second.done()
    assert room.waiting("m") == 1
    turn.taken()
    (await asyncio.wait_for(second, DEADLINE_S)).taken()


# (e) queue full


async def test_a_waiter_with_too_many_ahead_is_refused_at_arrival_with_a_429(
    room: WaitingRoom, clock: FakeClock
) -> None:
    set_drain_rate(room, clock)  # 2 per second
    # predicted (ahead + 1) / 2 s: all six are let wait
    waiters = [asyncio.create_task(room.wait(ask(), never)) for _ in range(6)]
    await until(lambda: room.waiting("m") == 6)
    assert room.refused == 0
    with pytest.raises(RateLimited) as caught:
        await room.wait(ask(max_wait_s=1.0), always)  # predicted 3.5 s
    error = caught.value
    assert error.status == 429
    assert error.code == "queue_full"
    assert error.headers == {"Retry-After": "3", "X-Overspill-Limit": "max_wait_s"}  # 2.5 s up
    assert "predicted wait 3.5 s > max_wait_s 1" in error.message
    assert room.refused == 1
    assert room.waiting("m") == 6  # the refused one never joined
    await cancel(*waiters)
    assert room.waiting("m") == 0


async def test_a_refused_waiter_is_told_to_retry_after_at_least_a_second(
    room: WaitingRoom, clock: FakeClock
) -> None:
    set_drain_rate(room, clock)
    waiters = [asyncio.create_task(room.wait(ask(), never)) for _ in range(2)]
    await until(lambda: room.waiting("m") == 2)
    with pytest.raises(RateLimited) as caught:
        await room.wait(ask(max_wait_s=1.4), always)  # predicted 1.5 s: 0.1 s too long
    assert caught.value.headers["Retry-After"] == "1"
    await cancel(*waiters)


async def test_less_urgent_waiters_do_not_count_ahead_of_an_interactive_newcomer(
    room: WaitingRoom, clock: FakeClock
) -> None:
    set_drain_rate(room, clock)
    batch = [asyncio.create_task(room.wait(ask(BATCH), never)) for _ in range(6)]
    await until(lambda: room.waiting("m") == 6)
    with pytest.raises(RateLimited):
        await room.wait(ask(BATCH, max_wait_s=1.0), always)  # 6 ahead: 3.5 s
    urgent = asyncio.create_task(room.wait(ask(INTERACTIVE, max_wait_s=1.0), never))  # 0.5 s
    # it joined (and may have timed out since, however slow this machine is): not refused
    await until(lambda: room.waiting("m") + room.timed_out == 7)
    assert room.refused == 1
    await cancel(urgent, *batch)


async def test_without_a_known_drain_rate_nobody_is_refused_at_arrival(room: WaitingRoom) -> None:
    room.started("m")  # one start is too few for a rate
    assert room.drain_rate("m") is None
    waiters = [asyncio.create_task(room.wait(ask(max_wait_s=0.1 + i), never)) for i in range(10)]
    # every one joined (the hastiest may have timed out since, however slow this machine is)
    await until(lambda: room.waiting("m") + room.timed_out == 10)
    assert room.refused == 0
    await cancel(*waiters)
    assert room.waiting("m") == 0


async def test_the_drain_rate_counts_starts_over_the_time_since_the_first(
    room: WaitingRoom, clock: FakeClock
) -> None:
    set_drain_rate(room, clock)
    clock.t = 4.0
    assert room.drain_rate("m") == pytest.approx(0.5)  # 2 starts in 4 s
    room.started("m")
    assert room.drain_rate("m") == pytest.approx(0.75)  # 3 in 4 s
    clock.t = 32.0
    room.started("m")  # the starts of 0 and 1 s fall out of the 30 s window
    assert room.drain_rate("m") == pytest.approx(2 / 28)  # those of 4 and 32 s


async def test_the_drain_rate_forgets_starts_older_than_the_window(
    room: WaitingRoom, clock: FakeClock
) -> None:
    set_drain_rate(room, clock)
    clock.t = 100.0
    assert room.drain_rate("m") is None  # no start in the last 30 s: too few


async def test_a_lone_waiter_is_not_refused_on_starts_older_than_the_window(
    room: WaitingRoom, clock: FakeClock
) -> None:
    set_drain_rate(room, clock)
    clock.t = 100.0
    turn = await asyncio.wait_for(room.wait(ask(max_wait_s=30.0), always), DEADLINE_S)
    turn.taken()


async def test_a_waiter_let_in_counts_once_in_the_drain_rate(
    room: WaitingRoom, clock: FakeClock
) -> None:
    room.started("m")  # a request that found a free engine at 0 s
    clock.t = 1.0
    turn = await asyncio.wait_for(room.wait(ask(), always), DEADLINE_S)
    room.started("m")  # the waiter got its local engine (waited or not, started() says)
    turn.taken()
    clock.t = 2.0
    unwaited = WaitingRoom(clock.now)  # the same two starts, neither of them waited
    clock.t = 0.0
    unwaited.started("m")
    clock.t = 1.0
    unwaited.started("m")
    clock.t = 2.0
    assert room.drain_rate("m") == unwaited.drain_rate("m")


# (f) timeout


async def test_a_waiter_that_waits_max_wait_s_is_refused_with_a_503(room: WaitingRoom) -> None:
    started = time.monotonic()
    with pytest.raises(Overloaded) as caught:
        await room.wait(ask(max_wait_s=0.2), never)
    assert time.monotonic() - started > 0.15  # it did wait (a lower bound: never machine speed)
    error = caught.value
    assert error.status == 503
    assert error.code == "queue_timeout"
    assert error.headers == {"Retry-After": "1"}  # no drain rate: max_wait_s, at least 1 s
    assert "waited 0.2 s (max_wait_s of priority 'interactive')" in error.message
    assert room.waiting("m") == 0
    assert room.timed_out == 1
    assert room.refused == 0


async def test_a_timed_out_waiter_leaves_the_others_waiting(room: WaitingRoom) -> None:
    engine = Engine(free=0)
    patient = asyncio.create_task(room.wait(ask(), engine.ready))
    hasty = asyncio.create_task(room.wait(ask(max_wait_s=0.2), engine.ready))
    with pytest.raises(Overloaded):
        await asyncio.wait_for(hasty, DEADLINE_S)
    assert room.waiting("m") == 1
    engine.free = 1
    room.wake()
    (await asyncio.wait_for(patient, DEADLINE_S)).taken()
    assert room.timed_out == 1


# (g) cancelled waiters


async def test_a_cancelled_waiter_leaves_the_queue_and_the_next_still_gets_its_turn(
    room: WaitingRoom, clock: FakeClock
) -> None:
    engine = Engine(free=0)
    gone = asyncio.create_task(room.wait(ask(INTERACTIVE), engine.ready))
    await until(lambda: room.waiting("m") == 1)
    clock.t = 1.0
    next_one = asyncio.create_task(room.wait(ask(BATCH), engine.ready))
    await until(lambda: room.waiting("m") == 2)
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert room.waiting("m") == 1
    engine.free = 1
    room.wake()
    (await asyncio.wait_for(next_one, DEADLINE_S)).taken()
    assert room.waiting("m") == 0
    assert (room.refused, room.timed_out) == (0, 0)


async def test_a_waiter_cancelled_as_it_is_let_in_hands_its_turn_back_at_once(
    room: WaitingRoom, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only the hand-back can let the next one in: the handover timeout would take too long.
    monkeypatch.setattr(waiting, "HANDOVER_S", NEVER_S)
    engine = Engine(free=0)
    tasks: list[asyncio.Task[Turn]] = []

    def ready_then_gone() -> bool:
        if engine.ready():
            tasks[0].cancel()  # its client leaves just as it is let in
        return engine.ready()

    tasks.append(asyncio.create_task(room.wait(ask(), ready_then_gone)))
    await until(lambda: room.waiting("m") == 1)
    clock.t = 1.0
    tasks.append(asyncio.create_task(room.wait(ask(), engine.ready)))
    await until(lambda: room.waiting("m") == 2)
    engine.free = 1
    room.wake()
    turn = await asyncio.wait_for(tasks[1], DEADLINE_S)
    turn.taken()
    assert tasks[0].cancelled()
    assert room.waiting("m") == 0


# (h) close


async def test_close_stops_the_dispatchers(room: WaitingRoom) -> None:
    engine = Engine(free=0)
    waiter = asyncio.create_task(room.wait(ask(max_wait_s=0.3), engine.ready))
    await until(lambda: room.waiting("m") + room.timed_out == 1)  # it joined (maybe timed out)
    await room.close()
    assert all(task.done() for task in room._dispatchers.values())
    engine.free = 1
    room.wake()
    with pytest.raises(Overloaded):  # nobody lets it in any more
        await asyncio.wait_for(waiter, DEADLINE_S)
    assert engine.free == 1
    assert room.timed_out == 1


async def test_closing_a_room_nobody_waited_in_does_nothing() -> None:
    room = WaitingRoom()
    await room.close()
    await room.close()
    assert room.waiting("m") == 0


async def test_a_dispatcher_stops_by_itself_once_its_queue_is_empty(room: WaitingRoom) -> None:
    (await asyncio.wait_for(room.wait(ask(), always), DEADLINE_S)).taken()
    await until(lambda: room._dispatchers["m"].done())
    (await asyncio.wait_for(room.wait(ask(), always), DEADLINE_S)).taken()  # a new one starts
    assert room.waiting("m") == 0


async def test_each_model_has_its_own_queue(room: WaitingRoom) -> None:
    engine = Engine(free=0)
    blocked = asyncio.create_task(room.wait(ask(), engine.ready))
    await until(lambda: room.waiting("m") == 1)
    other = Ask("other", "interactive", INTERACTIVE, 1.0, 1000.0)
    (await asyncio.wait_for(room.wait(other, always), DEADLINE_S)).taken()
    assert (room.waiting("m"), room.waiting("other")) == (1, 0)
    await cancel(blocked)


# (g) a waiter that cannot go does not hold up one that can


@dataclass
class Room:
    """Local engines with room for requests of up to `fits` tokens; counts the questions."""

    fits: int
    asked: list[int] = field(default_factory=list)

    def ready_for(self, size: int) -> Callable[[], bool]:
        def ready() -> bool:
            self.asked.append(size)
            return size <= self.fits

        return ready


def sized(rank: int, size: int, group: str = "g") -> Ask:
    return Ask("m", NAMES[rank], rank, PATIENT_S, 1000.0, size, group)


async def test_a_waiter_too_large_for_the_room_does_not_hold_up_a_smaller_one(
    room: WaitingRoom, clock: FakeClock
) -> None:
    engines = Room(fits=0)
    large = asyncio.create_task(room.wait(sized(INTERACTIVE, 4000), engines.ready_for(4000)))
    await until(lambda: room.waiting("m") == 1)
    clock.t = 1.0
    small = asyncio.create_task(room.wait(sized(BATCH, 100), engines.ready_for(100)))
    await until(lambda: room.waiting("m") == 2)
    engines.fits = 1000  # room for the small one, not for the large one
    room.wake()
    turn = await asyncio.wait_for(small, DEADLINE_S)
    turn.taken()
    assert not large.done()
    assert room.waiting("m") == 1
    engines.fits = 8000
    room.wake()
    (await asyncio.wait_for(large, DEADLINE_S)).taken()


async def test_the_most_urgent_of_the_waiters_that_fit_goes_first(
    room: WaitingRoom, clock: FakeClock
) -> None:
    engines = Room(fits=0)
    order: list[str] = []

    async def wait(name: str, rank: int, size: int) -> None:
        (await room.wait(sized(rank, size), engines.ready_for(size))).taken()
        order.append(name)

    tasks = [asyncio.create_task(wait("huge interactive", INTERACTIVE, 9000))]
    await until(lambda: room.waiting("m") == 1)
    for step, (name, rank) in enumerate([("batch", BATCH), ("interactive", INTERACTIVE)]):
        clock.t = 1.0 + step
        tasks.append(asyncio.create_task(wait(name, rank, 100)))
        await until(lambda n=step + 2: room.waiting("m") == n)  # type: ignore[misc]
    engines.fits = 1000
    room.wake()
    await until(lambda: len(order) == 2)
    assert order == ["interactive", "batch"]
    await cancel(tasks[0])  # type: ignore[arg-type]


async def test_a_larger_waiter_of_a_group_is_not_asked_once_a_smaller_one_did_not_fit(
    room: WaitingRoom, clock: FakeClock
) -> None:
    engines = Room(fits=0)
    tasks = []
    for step, size in enumerate([500, 200, 900, 300]):
        clock.t = float(step)
        tasks.append(
            asyncio.create_task(room.wait(sized(INTERACTIVE, size), engines.ready_for(size)))
        )
        await until(lambda n=step + 1: room.waiting("m") == n)  # type: ignore[misc]
    engines.asked.clear()
    room.wake()
    await until(lambda: len(engines.asked) >= 4)  # two passes at least
    assert set(engines.asked) == {500, 200}  # 900 and 300 are larger than 200, which did not fit
    other = asyncio.create_task(room.wait(sized(INTERACTIVE, 5000, "h"), engines.ready_for(5000)))
    await until(lambda: 5000 in engines.asked)  # another group is asked on its own account
    await cancel(*tasks, other)
