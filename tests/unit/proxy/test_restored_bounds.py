"""proxy/legs/restored.py on hostile answers: a stream's event is cut out of its chunks by
reading each chunk once, however many chunks it spans (the bytes read are counted, never timed);
an event past a mebibyte (MAX_EVENT_BYTES) ends the stream as an upstream error and closes the
cloud's; a whole answer of thousands of placeholders comes back whole."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson
import pytest

from policies.redaction import Placeholders
from proxy.errors import UpstreamUnreadable
from proxy.legs.restored import RestoredAnswer
from tests.unit.proxy.pipeline_harness import Whole

BOUND = 1024 * 1024  # restored.MAX_EVENT_BYTES: a provider's events are a few tokens each


class Read(bytes):
    """A chunk that counts the bytes read through its methods: searched, or copied into a
    longer buffer (`pending + chunk` copies what came before it too)."""

    bytes_read = 0

    def _read(self, start: Any = 0) -> None:
        Read.bytes_read += len(self) - (start or 0)

    def find(self, sub: Any, start: Any = 0, *args: Any) -> int:
        self._read(start)
        return bytes.find(self, sub, start, *args)

    def split(self, *args: Any, **kwargs: Any) -> list[bytes]:
        self._read()
        return bytes.split(self, *args, **kwargs)

    def __radd__(self, before: bytes) -> bytes:
        Read.bytes_read += len(before) + len(self)
        return before + bytes(self)

    def __add__(self, after: Any) -> bytes:
        Read.bytes_read += len(self) + len(after)
        return bytes(self) + bytes(after)


@dataclass
class Pieces:
    """A cloud's stream as chunks of any size; records whether it was closed."""

    parts: list[bytes]
    stream: bool = True
    status: int = 200
    closed: bool = False
    read_to: int = 0  # how many chunks were taken

    def headers(self) -> list[tuple[bytes, bytes]]:
        return [(b"content-type", b"text/event-stream")]

    async def read(self) -> bytes:
        return b"".join(self.parts)

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            for part in self.parts:
                self.read_to += 1
                yield part
        finally:
            self.closed = True

    def close(self) -> None:
        pass


def event(text: str) -> bytes:
    choice = {"index": 0, "delta": {"content": text}, "finish_reason": None}
    return b"data: " + orjson.dumps({"choices": [choice]}) + b"\n\n"


def in_pieces(data: bytes, size: int) -> list[bytes]:
    return [Read(data[i : i + size]) for i in range(0, len(data), size)]


def places() -> Placeholders:
    found = Placeholders()
    found.of("email", "jane@exemplo.com")
    return found


async def text_of(answer: RestoredAnswer) -> str:
    out = []
    async for chunk in answer.chunks():
        for sse in chunk.split(b"\n\n"):
            if sse.startswith(b"data: {"):
                out.append(orjson.loads(sse[6:])["choices"][0]["delta"]["content"])
    return "".join(out)


async def test_a_long_event_in_small_pieces_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Read, "bytes_read", 0)
    text = "write to <EMAIL_1> " + "a" * 200_000
    stream = event(text) + event(" bye") + b"data: [DONE]\n\n"
    restored = await text_of(RestoredAnswer(Pieces(in_pieces(stream, 1024)), places()))
    assert restored == "write to jane@exemplo.com " + "a" * 200_000 + " bye"
    # each piece read once; added to all that came before it, ~200 pieces cost ~20 MB
    assert Read.bytes_read <= 2 * len(stream)


async def test_events_split_anywhere_come_out_whole() -> None:
    stream = event("to <EM") + event("AIL_1> now") + b"data: [DONE]\n\n"
    for size in (1, 2, 3, 7):
        answer = RestoredAnswer(Pieces(in_pieces(stream, size)), places())
        assert await text_of(answer) == "to jane@exemplo.com now"


async def test_an_event_past_the_bound_ends_the_stream_as_an_upstream_error() -> None:
    stream = event("hi") + event("a" * BOUND) + event("never")
    cloud = Pieces(in_pieces(stream, 64 * 1024))
    passed: list[bytes] = []

    async def read_all() -> None:
        async for chunk in RestoredAnswer(cloud, places()).chunks():
            passed.append(chunk)

    with pytest.raises(UpstreamUnreadable):
        await read_all()
    assert len(passed) == 1  # the event before it passed
    assert cloud.closed  # the cloud's stream was ended at once, not read to its end
    assert cloud.read_to <= BOUND // (64 * 1024) + 3


async def test_one_chunk_holding_an_event_past_the_bound_is_refused_too() -> None:
    cloud = Pieces([event("a" * BOUND)])
    with pytest.raises(UpstreamUnreadable):
        await text_of(RestoredAnswer(cloud, places()))


async def test_an_event_just_under_the_bound_passes() -> None:
    text = "a" * (BOUND - 100)
    answer = RestoredAnswer(Pieces(in_pieces(event(text), 64 * 1024)), places())
    assert await text_of(answer) == text


async def test_a_whole_answer_asked_to_repeat_a_placeholder_comes_back_whole() -> None:
    message = {"role": "assistant", "content": "<EMAIL_1>," * 8000}
    body = orjson.dumps({"choices": [{"index": 0, "message": message}]})
    answer = RestoredAnswer(Whole(body), places())
    content = orjson.loads(await answer.read())["choices"][0]["message"]["content"]
    assert content == "jane@exemplo.com," * 8000
