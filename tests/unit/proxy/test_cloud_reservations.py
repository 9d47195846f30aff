"""A cloud call reserves its worst case against its tenant's budget when the chain reaches the
cloud target, and its true cost settles the reservation however the call ends: the real Pipeline
(tests/unit/proxy/pipeline_harness.py) with a scripted provider on OpenAI's wire, a fake clock,
no socket."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest

from policies.budget import Reserved
from policies.model import CloudTarget
from proxy.errors import UpstreamError, UpstreamUnavailable
from proxy.http.handlers import PipelineResponse
from proxy.legs.answer import Answer
from proxy.legs.cloud import Cloud
from proxy.schema import parse_request
from tests.fakes import until
from tests.unit.proxy.pipeline_harness import Harness, Sent, Whole, chat_answer, harness, status

# The provider's prices here: a prompt token $0.0001, an answer token $0.001.
PROMPT_USD, ANSWER_USD = 1e-4, 1e-3
MAX_TOKENS = 10  # each call's worst case: its prompt and 10 answer tokens, about $0.011

POLICY = """
[retry]
attempts = 1

[[backends]]
name = "a"
kind = "vllm"
url = "http://a.invalid"
models = { other = "other" }

[[clouds]]
name = "mini"
model = "openai/gpt-4o-mini"
wire = "openai"

[[routes]]
model = "m"
cloud = ["mini"]

[[tenants]]
name = "acme"
cloud_budget_usd = 0.025
"""


class PricedCloud(Cloud):
    """The cloud leg's prices without litellm's tables."""

    def price(self, target: CloudTarget, prompt: int, completion: int) -> float:
        return prompt * PROMPT_USD + completion * ANSWER_USD


@dataclass
class Stream:
    """A provider's stream that sends `events` events, then breaks."""

    stream: bool = True
    status: int = 200
    events: int = 1

    def headers(self) -> list[tuple[bytes, bytes]]:
        return [(b"content-type", b"text/event-stream")]

    async def read(self) -> bytes:
        raise AssertionError("a stream is not read whole")

    async def chunks(self) -> AsyncIterator[bytes]:
        for _ in range(self.events):
            yield b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}}]}\n\n'
        raise UpstreamUnavailable("mini: the stream broke")

    def close(self) -> None:
        pass


@dataclass
class Provider:
    """The provider on OpenAI's wire (through the engine client), scripted: each call takes the
    next step; with `held`, calls wait until it is set."""

    steps: list[UpstreamError | bytes | Stream]
    held: asyncio.Event | None = None
    calls: int = 0
    arrived: list[asyncio.Event] = field(default_factory=list)

    async def open(
        self, backend: str, url: str, body: bytes, headers: Mapping[str, str], stream: bool
    ) -> Answer:
        step = self.steps[min(self.calls, len(self.steps) - 1)]
        self.calls += 1
        if self.held is not None and not isinstance(step, Stream):
            await self.held.wait()
        if isinstance(step, UpstreamError):
            raise step
        return step if isinstance(step, Stream) else Whole(step)

    async def get(self, url: str, limit_s: float) -> tuple[int, bytes]:
        raise AssertionError("no probes in unit tests")

    async def close(self) -> None:
        pass


def priced(provider: Provider, policy: str = POLICY) -> Harness:
    h = harness({"a": [chat_answer("local")]}, policy)
    h.pipeline.runtime.cloud = PricedCloud()
    h.pipeline.runtime.upstream = provider
    return h


def ask(n: int = 0, stream: bool = False) -> dict[str, Any]:
    question = {"role": "user", "content": f"question {n}"}
    return {"model": "m", "max_tokens": MAX_TOKENS, "stream": stream, "messages": [question]}


ACME = {"x-overspill-tenant": "acme"}


def spent(h: Harness) -> float:
    return h.pipeline.runtime.gate.spent(h.policy.tenants[0])


def reserved(h: Harness) -> Reserved:
    return h.pipeline.runtime.gate.reservations(h.policy.tenants[0])


async def test_calls_at_once_beyond_the_budget_are_refused_before_they_leave() -> None:
    """Three calls at once, each of a worst case of ~$0.011, on a budget of $0.025: two fit,
    the third is refused unsent (nothing was spent yet: without reservations all three went)."""
    answers = asyncio.Event()
    provider = Provider([chat_answer("from mini")], held=answers)
    h = priced(provider)
    sending = [asyncio.ensure_future(h.send(ask(n), ACME)) for n in range(3)]
    await until(lambda: any(s.done() for s in sending), "one refused")
    assert provider.calls == 2
    assert reserved(h).calls == 2
    first = next(s for s in sending if s.done())
    refused = first.result()
    assert refused.status == 503
    message = refused.json["error"]["message"]
    holds, worst = f"${2 * worst_case():.6f}", f"${worst_case():.6f}"
    assert f"budget: tenant 'acme' spent $0.000000 and holds {holds}" in message
    assert "2 cloud calls in flight, of its $0.025 cloud budget this day" in message
    assert f"this call may cost up to {worst}" in message
    answers.set()
    answered = [(await s).status for s in sending if s is not first]
    assert answered == [200, 200]
    assert reserved(h) == Reserved()  # settled: the true costs replaced the worst cases
    assert spent(h) == pytest.approx(2 * price_of_answer())


def worst_case() -> float:
    prompt = parse_request("chat", orjson.dumps(ask())).prompt_estimate
    return prompt * PROMPT_USD + MAX_TOKENS * ANSWER_USD


def price_of_answer() -> float:
    """chat_answer's usage: 3 prompt and 2 answer tokens."""
    return 3 * PROMPT_USD + 2 * ANSWER_USD


async def test_an_answer_settles_its_reservation_at_its_true_cost() -> None:
    h = priced(Provider([chat_answer("from mini")]))
    assert (await h.send(ask(), ACME)).status == 200
    assert (reserved(h), spent(h)) == (Reserved(), pytest.approx(price_of_answer()))


async def test_a_call_that_fails_gives_its_reservation_back_uncharged() -> None:
    h = priced(Provider([status(500)]))
    assert (await h.send(ask(), ACME)).status == 502
    assert (reserved(h), spent(h)) == (Reserved(), 0.0)


async def test_a_stream_cut_midway_settles_at_what_passed() -> None:
    h = priced(Provider([Stream()]))
    sent = await h.send(ask(stream=True), ACME)
    assert sent.status == 200
    assert b"the stream broke" in b"".join(m.get("body", b"") for m in sent.messages[1:])
    prompt = parse_request("chat", orjson.dumps(ask(stream=True))).prompt_estimate
    assert reserved(h) == Reserved()
    assert spent(h) == pytest.approx(prompt * PROMPT_USD + 1 * ANSWER_USD)  # one event passed


async def test_a_client_that_leaves_before_the_answer_settles_at_the_worst_case() -> None:
    provider = Provider([chat_answer("from mini")], held=asyncio.Event())
    h = priced(provider)
    leave = asyncio.Event()
    sending = asyncio.ensure_future(_send_then_leave(h, ask(), leave))
    await until(lambda: provider.calls == 1, "the call reached the provider")
    assert reserved(h).calls == 1
    leave.set()
    await sending
    assert (reserved(h), spent(h)) == (Reserved(), pytest.approx(worst_case()))


async def _send_then_leave(h: Harness, body: dict[str, Any], leave: asyncio.Event) -> Sent:
    """h.send, whose client goes away once `leave` is set."""

    async def receive() -> dict[str, Any]:
        await leave.wait()
        return {"type": "http.disconnect"}

    request = parse_request("chat", orjson.dumps(body))
    sent = Sent()
    respond = PipelineResponse(h.pipeline, request, "req-1", ACME, h.pipeline.identify(ACME))
    await respond({"type": "http", "state": {}}, receive, sent.send)
    return sent


async def test_a_retry_after_a_charged_try_reserves_again() -> None:
    """A stream that broke before its first chunk is charged (its prompt) and retried: the retry
    is a call too, held against the budget while it runs."""
    answers = asyncio.Event()
    provider = Provider([Stream(events=0), chat_answer("from mini")], held=answers)
    h = priced(provider, POLICY.replace("attempts = 1", "attempts = 2\njitter = false"))
    sending = asyncio.ensure_future(h.send(ask(stream=True), ACME))
    await until(lambda: provider.calls == 2, "the retry reached the provider")
    assert reserved(h).calls == 1  # held again for the retry
    answers.set()
    assert (await sending).status == 200
    assert reserved(h) == Reserved()
