"""Speculation on the request path, for a tenant with a token rate: a verified hit withdraws the
engine's request, and what the engine did for it (its prompt at least) is taken from the
tenant's tokens_per_minute, as for a stream closed early; a hit the engine never worked for is
free (issue 30, finding 10)."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from proxy.flow.caching import Answers
from proxy.schema import parse_request
from tests.unit.cache.test_store import PARAPHRASE, QUESTION, FakeEmbedder
from tests.unit.cache.test_store_verifier import FakeVerifier
from tests.unit.proxy.pipeline_harness import Harness, chat_answer, harness
from tests.unit.proxy.test_speculation import SHARED, asked, engine_called

# a bucket of 1,000 tokens refilling at one a minute: nothing comes back while the test runs
RATED = SHARED + '\n[[tenants]]\nname = "acme"\ntokens_per_minute = 1\nburst_s = 60000\n'
ACME = {"x-overspill-tenant": "acme"}


async def stored(policy: str) -> tuple[Harness, FakeVerifier]:
    """acme's cache holds the engine's answer to QUESTION; the verifier agrees a paraphrase is
    the same question once the test opens its gate."""
    verifier = FakeVerifier({QUESTION: 0.97})
    answers = Answers(embedder=FakeEmbedder(), verifier=verifier)
    h = harness({"a": [chat_answer("engine")], "b": [chat_answer("engine")]}, policy, answers)
    assert (await h.send(asked(QUESTION), ACME)).headers["x-overspill-cache"] == "miss"
    await answers.settle()
    verifier.gate = asyncio.Event()
    h.engines.held = asyncio.Event()
    return h, verifier


def level(h: Harness) -> float:
    bucket = h.pipeline.runtime.gate.load("acme").tokens
    assert bucket is not None
    return bucket.level


async def test_a_verified_hit_charges_the_engine_work_it_withdrew() -> None:
    h, verifier = await stored(RATED)
    before = level(h)
    sending = asyncio.create_task(h.send(asked(PARAPHRASE), ACME))
    await verifier.entered.wait()
    await engine_called(h, 2)  # the engine's work started while the verifier reads
    verifier.gate.set()
    sent = await sending
    assert sent.headers["x-overspill-cache"] == "hit-semantic"
    prompt = parse_request("chat", orjson.dumps(asked(PARAPHRASE))).prompt_estimate
    assert before - level(h) == pytest.approx(prompt, abs=0.1)  # its prefill, not nothing


async def test_a_hit_the_engine_never_worked_for_is_free() -> None:
    h, verifier = await stored(RATED.replace("[cache]", "[cache]\nspeculate = false"))
    before = level(h)
    verifier.gate.set()
    sent = await h.send(asked(PARAPHRASE), ACME)
    assert sent.headers["x-overspill-cache"] == "hit-semantic"
    assert len(h.engines.calls) == 1  # the first request's only
    assert level(h) == pytest.approx(before, abs=0.1)
