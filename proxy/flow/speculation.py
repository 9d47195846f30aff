"""Speculation: a semantic lookup that the answer verifier must read (one fp32 run, 11-12 ms of
CPU here, queued behind others' under load) starts the engine's work at the same time, and the
first to finish decides.

- The verifier agrees first: the stored answer is served, and the engine's request is withdrawn
  (cancelled as when a client leaves: the engine frees it, having prefilled it at most). What the
  engine did is charged to the caller's token rate as a stream closed early is: its prompt, and
  what it had sent (a hit costs nothing, but the work speculation started does).
- The engine's answer begins first: it is served (it answers the question asked, and a hit
  would now save only the rest of its decoding), and the reading is dropped, never run if it
  had not begun.
- The verifier refuses: the engine's answer, when it comes, as for any miss.

So a miss no longer waits for the verifier, the step that made a semantic miss cost 16 ms at
100,000 entries. It is done only where a withdrawn request costs little: when the plan sends the
request first to a local backend that has room now (never a cloud, which bills a cancelled call,
nor a saturated engine, whose queue it would lengthen), and where the cache rule allows
(`speculate`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from cache.store import Hit, Reading
from policies.decide import RoutingPlan
from policies.model import CacheRule
from proxy.flow.caching import Produced
from proxy.flow.usage import Usage, metered

# Why a speculated lookup was a miss when the engine's answer began before the verdict.
ENGINE_FIRST = "the engine answered before the verifier read the similar question"


def speculates(rule: CacheRule, plan: RoutingPlan) -> bool:
    """Start the engine's work while the verifier reads: allowed by the rule, and the request
    goes first to a local backend with room now."""
    return rule.speculate and plan.local_room_now


Computed = Callable[[int], None]  # tokens an engine computed for a request it was withdrawn from


def _uncounted(tokens: int) -> None:
    return None


async def raced(
    reading: Reading,
    shared: AbstractAsyncContextManager[Produced],
    prompt_estimate: int = 0,
    computed: Computed = _uncounted,
) -> Hit | Produced:
    """The verifier's hit, or the engine's answer (`shared` entered: the caller exits it), as
    the module says; for a hit, `computed` is told what the withdrawn engine work used (the
    caller's ticket: tokens_per_minute). Cancelled, it cancels both."""
    production = asyncio.ensure_future(shared.__aenter__())
    outcome = reading.outcome
    reading.stats.speculated += 1
    try:
        racing: set[asyncio.Future[Any]] = {outcome, production}
        await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
        if not outcome.done() and _answered(production):
            reading.drop()  # the engine's answer has begun: it is the answer
            return production.result()
        found = await outcome  # the verdict came first, or the production failed first
        if isinstance(found, Hit):
            reading.stats.withdrawn += 1
            used = await _withdrawn(production, shared, prompt_estimate)
            computed(used)
            return found
        return await production  # its error, if it failed
    except BaseException:
        outcome.cancel()
        await _withdrawn(production, shared)
        raise


def _answered(production: asyncio.Future[Produced]) -> bool:
    return production.done() and not production.cancelled() and production.exception() is None


async def _withdrawn(
    production: asyncio.Future[Produced],
    shared: AbstractAsyncContextManager[Produced],
    prompt_estimate: int = 0,
) -> int:
    """Cancel the engine's work and wait until it is released (its in-flight count, its flight,
    the upstream request). An answer that came all the same is closed. The tokens the engine
    used for it: what had passed of its answer (prompt and pieces, as for a stream closed
    early), the prompt's prefill if it was cut before answering, nothing if it failed."""
    production.cancel()
    with contextlib.suppress(asyncio.CancelledError):  # this request cancelled meanwhile
        await asyncio.wait({production})
    if not _answered(production):
        return prompt_estimate if production.cancelled() else 0
    head, chunks = production.result()
    passed: list[Usage | None] = []
    try:
        await _closed(metered(chunks, head.stream, prompt_estimate, passed.append))
    finally:
        await shared.__aexit__(None, None, None)
    usage = passed[0] if passed else None
    return usage.total if usage is not None else prompt_estimate


async def _closed(chunks: AsyncIterator[bytes]) -> None:
    """A body closed unsent. A stream's generators hold its target until they end, but one never
    started runs nothing when closed: it is started first (its first chunk is in hand already,
    read before the head came), then closed."""
    aclose = getattr(chunks, "aclose", None)
    if aclose is None:  # a whole body: its target was released when it was read
        return
    try:
        with contextlib.suppress(Exception):
            await anext(chunks)
    finally:
        await aclose()
