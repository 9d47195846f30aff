"""proxy/flow/speculation.py on the request path: while the answer verifier reads a candidate,
the engine's work starts too, and the first to finish decides. The real Pipeline with scripted
engines, a fake embedder and a fake verifier whose readings the test releases, so which comes
first is set by the test, never by this machine's speed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest

from cache.stats import CacheStats
from cache.store import Hit, Miss, Reading
from cache.verifier import AGREES
from policies.decide import RoutingPlan, Target
from policies.model import CacheRule
from proxy.flow.caching import Answers, Head, Produced
from proxy.flow.speculation import ENGINE_FIRST, raced, speculates
from tests.unit.cache.test_store import PARAPHRASE, QUESTION, UNRELATED, FakeEmbedder
from tests.unit.cache.test_store_verifier import FakeVerifier
from tests.unit.proxy.pipeline_harness import POLICY, Harness, chat_answer, harness, status

# these callers give no key: the anonymous scope shares similar questions' answers only so
SHARED = POLICY + "\n[cache]\nsemantic_unkeyed = true\n"
NO_SPECULATION = SHARED + "speculate = false\n"


def asked(text: str) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": text}], "temperature": 0}


async def stored(verdict: float, policy: str = SHARED) -> tuple[Harness, FakeVerifier]:
    """A pipeline whose cache holds the engine's answer to QUESTION; the verifier will give
    `verdict` for it, once the test opens its gate."""
    verifier = FakeVerifier({QUESTION: verdict})
    answers = Answers(embedder=FakeEmbedder(), verifier=verifier)
    h = harness({"a": [chat_answer("engine")], "b": [chat_answer("engine")]}, policy, answers)
    first = await h.send(asked(QUESTION))
    assert first.headers["x-overspill-cache"] == "miss"
    await answers.settle()
    verifier.gate = asyncio.Event()
    h.engines.held = asyncio.Event()
    return h, verifier


def in_flight(h: Harness) -> int:
    return sum(monitor.in_flight for monitor in h.pipeline.runtime.backends.monitors.values())


async def engine_called(h: Harness, calls: int) -> None:
    while len(h.engines.calls) < calls:
        h.engines.arrived.clear()
        await h.engines.arrived.wait()


async def test_a_hit_the_verifier_agrees_on_first_withdraws_the_engines_request() -> None:
    h, verifier = await stored(0.97)
    sending = asyncio.create_task(h.send(asked(PARAPHRASE)))
    await verifier.entered.wait()
    await engine_called(h, 2)  # the engine's work started while the verifier reads
    assert in_flight(h) == 1
    verifier.gate.set()  # type: ignore[union-attr]
    sent = await sending
    assert sent.headers["x-overspill-cache"] == "hit-semantic"
    assert sent.json["choices"][0]["message"]["content"] == "engine"  # the stored answer
    assert in_flight(h) == 0  # withdrawn: the engine's request released
    stats = h.pipeline.runtime.answers.cache.stats
    assert (stats.speculated, stats.withdrawn, stats.overtaken) == (1, 1, 0)
    assert sent.record.cache_status == "hit-semantic"
    assert all(b.state_at(0) == "closed" for b in h.pipeline.breakers.values())


async def test_an_engine_answer_that_begins_first_is_served_and_the_reading_dropped() -> None:
    h, _ = await stored(0.97)
    h.engines.held.set()  # type: ignore[union-attr]  # the engine answers at once
    sent = await h.send(asked(PARAPHRASE))  # the verifier's gate stays shut
    assert sent.headers["x-overspill-cache"] == "miss"
    assert sent.headers["x-overspill-route"] in ("local/a", "local/b")
    assert sent.record.cache == f"miss: {ENGINE_FIRST}"  # the access log says why
    stats = h.pipeline.runtime.answers.cache.stats
    assert (stats.speculated, stats.withdrawn, stats.overtaken) == (1, 0, 1)
    assert stats.hits_semantic == 0
    await h.pipeline.runtime.answers.settle()
    assert len(h.pipeline.runtime.answers.cache) == 2  # the engine's answer is kept too


async def test_a_candidate_the_verifier_refuses_waits_for_the_engines_answer() -> None:
    h, verifier = await stored(AGREES - 0.2)
    sending = asyncio.create_task(h.send(asked(PARAPHRASE)))
    await engine_called(h, 2)
    verifier.gate.set()  # type: ignore[union-attr]
    await verifier.answered.wait()
    for _ in range(10):  # the verdict reaches the race (the loop's order, no clock)
        await asyncio.sleep(0)
    assert h.pipeline.runtime.answers.cache.stats.disagreed == 1
    assert not sending.done()  # refused: the engine's answer is the one to wait for
    h.engines.held.set()  # type: ignore[union-attr]
    sent = await sending
    assert sent.headers["x-overspill-cache"] == "miss"
    assert sent.record.cache == "miss"
    stats = h.pipeline.runtime.answers.cache.stats
    assert (stats.speculated, stats.withdrawn, stats.overtaken, stats.disagreed) == (1, 0, 0, 1)


async def test_an_engine_that_fails_before_the_verdict_leaves_the_hit_to_serve() -> None:
    h, verifier = await stored(0.97, SHARED.replace("attempts = 3", "attempts = 1"))
    h.engines.script = {"a": [status(404)], "b": [status(404)]}  # the request itself is wrong
    h.engines.held.set()  # type: ignore[union-attr]
    sending = asyncio.create_task(h.send(asked(PARAPHRASE)))
    await engine_called(h, 2)
    for _ in range(10):  # the failure lands before the verdict (the loop's order, no clock)
        await asyncio.sleep(0)
    verifier.gate.set()  # type: ignore[union-attr]
    sent = await sending
    assert sent.status == 200
    assert sent.headers["x-overspill-cache"] == "hit-semantic"


async def test_without_speculation_the_engine_waits_for_the_verifier() -> None:
    h, verifier = await stored(AGREES - 0.2, NO_SPECULATION)
    h.engines.held.set()  # type: ignore[union-attr]
    sending = asyncio.create_task(h.send(asked(PARAPHRASE)))
    await verifier.entered.wait()
    for _ in range(20):
        await asyncio.sleep(0)
    assert h.engines.calls == ["a"] or h.engines.calls == ["b"]  # only the first request's
    verifier.gate.set()  # type: ignore[union-attr]
    sent = await sending
    assert sent.headers["x-overspill-cache"] == "miss"
    assert len(h.engines.calls) == 2
    assert h.pipeline.runtime.answers.cache.stats.speculated == 0


async def test_a_clear_miss_is_not_speculated_it_never_reaches_the_verifier() -> None:
    h, verifier = await stored(0.97)
    h.engines.held.set()  # type: ignore[union-attr]
    sent = await h.send(asked(UNRELATED))
    assert sent.headers["x-overspill-cache"] == "miss"
    assert verifier.calls == []
    assert h.pipeline.runtime.answers.cache.stats.speculated == 0


async def test_a_client_that_leaves_during_the_race_releases_both() -> None:
    h, verifier = await stored(0.97)
    sending = asyncio.create_task(h.send(asked(PARAPHRASE)))
    await verifier.entered.wait()
    await engine_called(h, 2)
    sending.cancel()
    with pytest.raises(asyncio.CancelledError):
        await sending
    assert in_flight(h) == 0
    stats = h.pipeline.runtime.answers.cache.stats
    assert (stats.withdrawn, stats.overtaken, stats.hits_semantic) == (0, 0, 0)


LOCAL, CLOUD = Target("local", "a", "m"), Target("cloud", "mini", "openai/gpt-4o-mini")


@pytest.mark.parametrize(
    ("rule", "targets", "saturated", "expected"),
    [
        (CacheRule(), (LOCAL, CLOUD), frozenset(), True),
        (CacheRule(speculate=False), (LOCAL, CLOUD), frozenset(), False),
        (CacheRule(), (LOCAL, CLOUD), frozenset({"a"}), False),  # it would queue there
        (CacheRule(), (CLOUD, LOCAL), frozenset(), False),  # a cancelled call is billed
        (CacheRule(), (), frozenset(), False),
    ],
)
def test_speculation_only_toward_a_local_backend_with_room(
    rule: CacheRule, targets: tuple[Target, ...], saturated: frozenset[str], expected: bool
) -> None:
    plan = RoutingPlan("m", targets, (), saturated=saturated)
    assert speculates(rule, plan) is expected


class Held:
    """What a target holds while its body passes: entered with the answer, released when the
    body's generator ends (as proxy/flow/attempts.py's relayed stream does)."""

    def __init__(self) -> None:
        self.held = True

    async def body(self) -> AsyncIterator[bytes]:
        try:
            yield b"data: first\n\n"
            yield b"data: second\n\n"
        finally:
            self.held = False


class Shared:
    def __init__(self, produced: Produced) -> None:
        self.produced = produced
        self.exited = False

    async def __aenter__(self) -> Produced:
        return self.produced

    async def __aexit__(self, *exc: object) -> None:
        self.exited = True


async def test_a_stream_that_began_with_the_verdict_is_closed_and_releases_its_target() -> None:
    """The verifier agreed, and the engine's stream had begun in the same turn of the loop: the
    hit is served, and the stream, never sent, still releases what its target holds."""
    target = Held()
    shared = Shared((Head("local/a", 200, [], True), target.body()))
    hit = Hit("semantic", b"{}", 0.9)
    outcome: asyncio.Future[Hit | Miss] = asyncio.get_running_loop().create_future()
    outcome.set_result(hit)
    reading = Reading(np.zeros(8, dtype=np.float32), outcome, CacheStats())
    assert await raced(reading, shared) == hit
    assert not target.held
    assert shared.exited
    assert (reading.stats.speculated, reading.stats.withdrawn) == (1, 1)
