"""What a cloud answer relayed as bytes is billed when its usage cannot be read (issue 30,
finding 4): the most the call could cost (its prompt, and max tokens, else the model's maximum
output, times n), never the prompt alone. A client that leaves is still billed what passed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import orjson
import pytest

from policies.model import CloudTarget, Timeouts
from proxy.errors import UpstreamUnreadable
from proxy.legs import cloud_wire
from proxy.legs.answer import Answer
from proxy.legs.cloud_wire import open_wire
from proxy.legs.wire_answer import WireAnswer, WireBill
from proxy.schema import parse_request
from tests.unit.proxy.test_cloud_wire import DONE, Scripted, event

TARGET = CloudTarget("mini", "openai/gpt-4o-mini", "https://host.example/v1", "MINI_KEY")
WORST = 99.0


TEXT = [event({"choices": [{"index": 0, "delta": {"content": w}}]}) for w in ("a", "b", "c")]


@dataclass
class Bill:
    usd: list[float] = field(default_factory=list)

    def of(self) -> WireBill:
        return WireBill(lambda p, c: p + c / 1000, self.usd.append, 7, worst=lambda: WORST)


async def relayed(answer: WireAnswer) -> bytes:
    return b"".join([chunk async for chunk in answer.chunks()])


@pytest.mark.parametrize(
    "usage",
    [b"", b'data: {"choices":[],"usage":{"prompt_tokens": 3, \x00garbled}\n\n'],
    ids=["none sent", "garbled"],
)
async def test_a_stream_that_ends_without_readable_usage_is_billed_at_the_most(
    usage: bytes,
) -> None:
    bill = Bill()
    assert await relayed(WireAnswer(Scripted([*TEXT, usage, DONE]), bill.of(), stream=True))
    assert bill.usd == [WORST]


async def test_a_whole_answer_without_usage_is_billed_at_the_most() -> None:
    bill = Bill()
    body = orjson.dumps({"choices": [{"message": {"content": "hi"}}]})
    await WireAnswer(Scripted([body], stream=False), bill.of(), stream=False).read()
    assert bill.usd == [WORST]


async def test_a_client_that_leaves_is_still_billed_what_passed() -> None:
    bill = Bill()
    chunks = WireAnswer(Scripted([*TEXT, DONE]), bill.of(), stream=True).chunks()
    await anext(chunks)
    await chunks.aclose()  # type: ignore[attr-defined]
    assert bill.usd == [7 + 1 / 1000]  # the prompt's estimate, a token for the event


@dataclass
class Refusing:
    """An engine client whose upstream answered what cannot be read."""

    timeouts: Timeouts = field(default_factory=Timeouts)

    async def open(
        self, backend: str, url: str, body: bytes, headers: Mapping[str, str], stream: bool
    ) -> Answer:
        raise UpstreamUnreadable(f"{backend}: answered in an encoding other than identity")

    async def get(self, url: str, limit_s: float) -> tuple[int, bytes]:
        raise AssertionError("no probes here")

    async def close(self) -> None:
        pass


@pytest.mark.parametrize(
    ("extra", "most"),
    [({"max_tokens": 300}, 300), ({"max_tokens": 300, "n": 2}, 600), ({}, 16384)],
)
async def test_an_unreadable_answer_is_charged_the_most_the_call_could_cost(
    extra: dict[str, object], most: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cloud_wire, "max_output", lambda model: 16384)  # litellm's table
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], **extra}
    request = parse_request("chat", orjson.dumps(body))
    asked: list[tuple[int, int]] = []
    charged: list[float] = []

    def price(prompt: int, completion: int) -> float:
        asked.append((prompt, completion))
        return 1.0

    with pytest.raises(UpstreamUnreadable):
        await open_wire(Refusing(), TARGET, request, "r1", price, charged.append)
    assert asked == [(request.prompt_estimate, most)]
    assert charged == [1.0]
