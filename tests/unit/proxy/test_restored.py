"""proxy/legs/restored.py: a cloud answer to a redacted request comes back with its values,
whole or streamed event by event, a placeholder split across events included, in the content
and in tool-call arguments; nothing else in the events changes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson

from policies.redaction import Placeholders
from proxy.legs.restored import RestoredAnswer


@dataclass
class Events:
    """A stream as the cloud leg yields it: one SSE event per chunk."""

    events: list[dict[str, Any]]
    stream: bool = True
    status: int = 200

    def headers(self) -> list[tuple[bytes, bytes]]:
        return [(b"content-type", b"text/event-stream")]

    async def read(self) -> bytes:
        return orjson.dumps(self.events[0])

    async def chunks(self) -> AsyncIterator[bytes]:
        for event in self.events:
            yield b"data: " + orjson.dumps(event) + b"\n\n"
        yield b"data: [DONE]\n\n"

    def close(self) -> None:
        pass


def places() -> Placeholders:
    found = Placeholders()
    found.of("email", "jane@exemplo.com")
    found.of("phone", "+1 415 555 0100")
    return found


def content(text: str, finish: str | None = None, index: int = 0) -> dict[str, Any]:
    choice = {"index": index, "delta": {"content": text}, "finish_reason": finish}
    return {"object": "chat.completion.chunk", "choices": [choice]}


def arguments(text: str, finish: str | None = None) -> dict[str, Any]:
    call = {"index": 0, "function": {"arguments": text}}
    choice = {"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": finish}
    return {"object": "chat.completion.chunk", "choices": [choice]}


async def received(answer: RestoredAnswer) -> list[dict[str, Any]]:
    events = []
    async for chunk in answer.chunks():
        for event in chunk.split(b"\n\n"):
            if event.startswith(b"data: {"):
                events.append(orjson.loads(event[6:]))
    return events


def text_of(events: list[dict[str, Any]], field: str = "content") -> str:
    out = []
    for event in events:
        for choice in event["choices"]:
            delta = choice["delta"]
            if field == "content":
                out.append(delta.get("content") or "")
            else:
                out += [c["function"]["arguments"] for c in delta.get("tool_calls") or []]
    return "".join(out)


async def test_a_stream_is_restored_though_a_placeholder_comes_in_pieces() -> None:
    stream = [content("Write to <"), content("EMAIL"), content("_1"), content("> now", "stop")]
    events = await received(RestoredAnswer(Events(stream), places()))
    assert text_of(events) == "Write to jane@exemplo.com now"
    assert events[-1]["choices"][0]["finish_reason"] == "stop"


async def test_a_tail_held_at_the_end_comes_out_before_done() -> None:
    stream = [content("call <PHO"), content("NE_1>")]  # no finish_reason at all
    events = await received(RestoredAnswer(Events(stream), places()))
    assert text_of(events) == "call +1 415 555 0100"


async def test_tool_call_arguments_are_restored_even_when_the_last_delta_has_none() -> None:
    stream = [
        arguments('{"to": "<EMA'),
        arguments('IL_1>"}'),
        arguments('{"x": "<EM'),
        content("", "tool_calls"),
    ]
    events = await received(RestoredAnswer(Events(stream), places()))
    assert text_of(events, "arguments") == '{"to": "jane@exemplo.com"}{"x": "<EM'


async def test_a_whole_answer_is_restored_in_content_and_tool_calls() -> None:
    message = {
        "role": "assistant",
        "content": "Done for <EMAIL_1>.",
        "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": '{"p": "<PHONE_1>"}'}}],
    }
    whole = {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
    answer = RestoredAnswer(Events([whole], stream=False), places())
    restored = orjson.loads(await answer.read())["choices"][0]["message"]
    assert restored["content"] == "Done for jane@exemplo.com."
    assert restored["tool_calls"][0]["function"]["arguments"] == '{"p": "+1 415 555 0100"}'
    assert answer.headers()[-1] == (b"x-overspill-redacted", b"2")
