"""proxy/legs/deadlines.py: limits kept by one watchdog behave as asyncio.timeout does: an await
past its limit raises TimeoutError, one in time is untouched, a cancellation from outside stays
a cancellation, a reused limit bounds each wait alone, and the watchdog stops when nothing is
watched. Real event loop; the tick is short so the tests wait little, and no test asserts how
late a limit fires."""

from __future__ import annotations

import asyncio

import pytest

from proxy.legs.deadlines import Deadlines

FOREVER = 3600.0


@pytest.fixture
def deadlines() -> Deadlines:
    return Deadlines(tick_s=0.001)


async def test_an_await_past_its_limit_raises_timeout(deadlines: Deadlines) -> None:
    with pytest.raises(TimeoutError), deadlines.within(0.01):
        await asyncio.Event().wait()


async def test_an_await_in_time_is_untouched_and_leaves_nothing_watched(
    deadlines: Deadlines,
) -> None:
    with deadlines.within(FOREVER):
        await asyncio.sleep(0)
    assert deadlines._watched == {}
    await asyncio.sleep(0.01)  # the watchdog's next look finds nothing and stops
    assert deadlines._timer is None


async def test_no_limit_is_no_limit(deadlines: Deadlines) -> None:
    with deadlines.within(None):
        await asyncio.sleep(0.005)
    assert deadlines._watched == {}


async def test_a_cancellation_from_outside_stays_a_cancellation(deadlines: Deadlines) -> None:
    started = asyncio.Event()

    async def waiting() -> None:
        with deadlines.within(FOREVER):
            started.set()
            await asyncio.Event().wait()

    task = asyncio.get_running_loop().create_task(waiting())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert deadlines._watched == {}


async def test_a_reused_limit_bounds_each_wait_alone(deadlines: Deadlines) -> None:
    """A stream's reader waits for each chunk within its limit: time spent between waits (the
    client reading) counts against none of them."""
    limit = deadlines.limit()
    for _ in range(3):
        with limit.within(0.05):
            await asyncio.sleep(0)
        await asyncio.sleep(0.06)  # longer than the limit, outside it
    with pytest.raises(TimeoutError), limit.within(0.01):
        await asyncio.Event().wait()


async def test_limits_of_many_tasks_fire_only_for_those_past_due(deadlines: Deadlines) -> None:
    async def wait(limit_s: float, done: asyncio.Event) -> str:
        try:
            with deadlines.within(limit_s):
                await done.wait()
        except TimeoutError:
            return "timed out"
        return "answered"

    answered = asyncio.Event()
    loop = asyncio.get_running_loop()
    late = loop.create_task(wait(0.01, asyncio.Event()))
    prompt = loop.create_task(wait(FOREVER, answered))
    assert await late == "timed out"
    answered.set()
    assert await prompt == "answered"


def test_a_limit_works_on_the_next_event_loop_too() -> None:
    """A loop that ended left the watchdog a timer that will never fire."""
    deadlines = Deadlines(tick_s=0.001)

    async def timed_out() -> bool:
        try:
            with deadlines.within(0.01):
                await asyncio.Event().wait()
        except TimeoutError:
            return True
        return False

    async def in_time() -> None:
        with deadlines.within(FOREVER):
            pass  # the loop ends before the watchdog's first look

    asyncio.run(in_time())
    assert deadlines._timer is not None
    assert asyncio.run(timed_out())
