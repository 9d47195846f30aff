"""What speculation's withdrawn engine work costs the caller's token rate: a verified hit is free,
but the engine's request started beside it prefilled its prompt at least, and is charged as a
stream closed early is (prompt and what passed), never nothing (issue 30, finding 10)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import numpy as np
import orjson

from cache.stats import CacheStats
from cache.store import Hit, Miss, Reading
from proxy.flow.caching import Head, Produced
from proxy.flow.gate import Ticket
from proxy.flow.speculation import raced
from proxy.flow.whole import Whole

PROMPT = 12  # the request's prompt estimate
HIT = Hit("semantic", b"{}", 0.9)


def reading(outcome: asyncio.Future[Hit | Miss]) -> Reading:
    return Reading(np.zeros(8, dtype=np.float32), outcome, CacheStats())


async def stream() -> AsyncIterator[bytes]:
    yield b'data: {"choices": [{"delta": {"content": "a"}}]}\n\n'
    yield b'data: {"choices": [{"delta": {"content": "b"}}]}\n\n'


class Shared:
    """An engine's production, entered by the race: `produced` once `ready` is set."""

    def __init__(self, produced: Produced | BaseException, ready: asyncio.Event) -> None:
        self.produced, self.ready = produced, ready
        self.exited = False

    async def __aenter__(self) -> Produced:
        await self.ready.wait()
        if isinstance(self.produced, BaseException):
            raise self.produced
        return self.produced

    async def __aexit__(self, *exc: object) -> None:
        self.exited = True


async def race(produced: Produced | BaseException, engine_first: bool) -> int:
    """The tokens charged for the engine's work when the verifier's hit wins the race; the
    engine's production ends before the verdict (`engine_first`: it failed, or began in the
    same turn), or is cut while under way."""
    outcome: asyncio.Future[Hit | Miss] = asyncio.get_running_loop().create_future()
    ready = asyncio.Event()
    ticket = Ticket(charge=PROMPT + 256)
    if engine_first:
        ready.set()
        outcome.set_result(HIT)
    else:
        asyncio.get_running_loop().call_soon(outcome.set_result, HIT)
    assert await raced(reading(outcome), Shared(produced, ready), PROMPT, ticket.computed) == HIT
    ticket.use(0)  # the hit itself computed nothing
    assert ticket.spent is not None
    return ticket.spent


async def test_work_cut_before_it_answered_costs_its_prompt() -> None:
    assert await race((Head("local/a", 200, [], True), stream()), engine_first=False) == PROMPT


async def test_a_stream_that_had_begun_costs_its_prompt_and_what_passed() -> None:
    produced = (Head("local/a", 200, [], True), stream())
    assert await race(produced, engine_first=True) == PROMPT + 1  # one piece had come


async def test_a_whole_answer_that_came_costs_the_usage_it_reports() -> None:
    usage = {"prompt_tokens": 9, "completion_tokens": 30}
    answer = Whole(orjson.dumps({"choices": [], "usage": usage}))
    assert await race((Head("local/a", 200, [], False), answer), engine_first=True) == 39


async def test_work_that_failed_costs_nothing_as_an_error_never_does() -> None:
    assert await race(ConnectionError("engine down"), engine_first=True) == 0
