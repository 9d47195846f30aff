"""Cloud targets that speak OpenAI's wire format (proxy/legs/cloud_wire.py, wire_answer.py):
what the call carries, and the answer relayed as bytes with its bill read off it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import orjson
import pytest

from policies.model import CloudTarget
from proxy.legs.cloud_wire import wire_body, wire_headers, wire_url
from proxy.legs.wire_answer import WireAnswer, WireBill
from proxy.schema import parse_request

TARGET = CloudTarget("mini", "openai/gpt-4o-mini", "https://host.example/v1/", "MINI_KEY")


def chat(**extra: object) -> bytes:
    return orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], **extra})


def test_the_call_names_the_providers_model_and_always_asks_a_stream_for_its_usage() -> None:
    request = parse_request("chat", chat(stream=True, stream_options={"include_usage": False}))
    params = {"messages": request.body["messages"], "stream_options": {"x": 1}}
    body = orjson.loads(wire_body(TARGET, request, params))
    assert body["model"] == "gpt-4o-mini"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}  # nothing else of the client's
    assert wire_url(TARGET, request) == "https://host.example/v1/chat/completions"


def test_a_whole_answer_carries_no_stream_options() -> None:
    request = parse_request("chat", chat())
    body = orjson.loads(wire_body(TARGET, request, {"stream_options": {"include_usage": True}}))
    assert "stream_options" not in body
    assert "stream" not in body


def test_the_key_comes_from_the_environment_variable_the_policy_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MINI_KEY", "sk-operator")
    assert wire_headers(TARGET, "r1")["authorization"] == "Bearer sk-operator"
    keyless = CloudTarget("local-gw", "openai/x", "http://gw.example/v1")
    assert "authorization" not in wire_headers(keyless, "r1")


@dataclass
class Scripted:
    """A provider's answer, in the pieces the wire delivered it in."""

    pieces: list[bytes]
    stream: bool = True
    status: int = 200
    closed: bool = False

    def headers(self) -> list[tuple[bytes, bytes]]:
        return [(b"content-type", b"text/event-stream")]

    async def read(self) -> bytes:
        return b"".join(self.pieces)

    async def chunks(self) -> AsyncIterator[bytes]:
        for piece in self.pieces:
            yield piece

    def close(self) -> None:
        self.closed = True


@dataclass
class Charges:
    usd: list[float] = field(default_factory=list)
    asked: list[tuple[int, int]] = field(default_factory=list)

    def price(self, prompt: int, completion: int) -> float:
        self.asked.append((prompt, completion))
        return (prompt + 2 * completion) / 1000

    def bill(self) -> WireBill:
        return WireBill(self.price, self.usd.append, prompt_estimate=7)


def event(payload: dict[str, object]) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


TEXT = [event({"choices": [{"index": 0, "delta": {"content": word}}]}) for word in ("a", "b")]
USAGE = event({"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 2}})
DONE = b"data: [DONE]\n\n"


async def relayed(answer: WireAnswer) -> bytes:
    return b"".join([chunk async for chunk in answer.chunks()])


async def test_a_stream_passes_as_sent_and_is_billed_from_its_usage() -> None:
    stream = b"".join([*TEXT, USAGE, DONE])
    pieces = [stream[:5], stream[5:61], stream[61:]]  # cut mid-event, as a wire may
    charges = Charges()
    answer = WireAnswer(Scripted(pieces), charges.bill(), stream=True, show_usage=True)
    assert await relayed(answer) == stream
    assert charges.asked == [(11, 2)]
    assert charges.usd == [0.015]  # once


async def test_the_usage_chunk_the_client_did_not_ask_for_is_left_out() -> None:
    charges = Charges()
    source = Scripted([*TEXT, USAGE, DONE])
    answer = WireAnswer(source, charges.bill(), stream=True, show_usage=False)
    assert await relayed(answer) == b"".join([*TEXT, DONE])
    assert charges.asked == [(11, 2)]  # priced all the same
    assert source.closed


async def test_a_stream_cut_short_is_billed_a_token_per_event_that_passed() -> None:
    charges = Charges()
    answer = WireAnswer(Scripted(TEXT), charges.bill(), stream=True)
    chunks = answer.chunks()
    await anext(chunks)  # the client reads the first event, then leaves
    await chunks.aclose()  # type: ignore[attr-defined]
    assert charges.asked == [(7, 1)]  # the prompt's estimate, a token for the event that passed


async def test_a_whole_answer_is_billed_from_its_usage_and_names_what_was_dropped() -> None:
    body = orjson.dumps({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 4}})
    charges = Charges()
    source = Scripted([body], stream=False)
    answer = WireAnswer(source, charges.bill(), stream=False, dropped=("user",))
    assert await answer.read() == body
    assert charges.usd == [0.013]
    assert (b"x-overspill-dropped", b"user") in answer.headers()


async def test_the_null_usage_openai_writes_in_every_chunk_is_not_shown_unasked() -> None:
    piece = b'data: {"choices":[{"index":0,"delta":{"content":"a"}}],"usage":null}\n\n'
    answer = WireAnswer(Scripted([piece, USAGE, DONE]), Charges().bill(), stream=True)
    answer.show_usage = False
    assert await relayed(answer) == piece.replace(b',"usage":null', b"") + DONE


def test_auto_speaks_openai_for_openai_models_only() -> None:
    assert CloudTarget("a", "openai/gpt-4o-mini", wire="auto").speaks_openai
    assert not CloudTarget("b", "anthropic/claude-haiku-4-5", wire="auto").speaks_openai
    assert CloudTarget("c", "openai/gpt-4o-mini").speaks_openai  # auto is the default
    assert not CloudTarget("d", "openai/gpt-4o-mini", wire="litellm").speaks_openai
