"""proxy/flow/usage.py: the tokens an answer used, read as it passes, stream or not."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import orjson

from proxy.flow.usage import Usage, metered
from proxy.flow.whole import Whole, joined

USAGE = {"prompt_tokens": 12, "completion_tokens": 30, "total_tokens": 42}


async def chunks_of(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


def event(payload: dict[str, object]) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def delta(text: str) -> bytes:
    return event({"choices": [{"index": 0, "delta": {"content": text}}]})


async def run(stream: bool, *parts: bytes) -> tuple[bytes, list[Usage | None]]:
    used: list[Usage | None] = []
    passed = b"".join([c async for c in metered(chunks_of(*parts), stream, 100, used.append)])
    return passed, used


async def test_a_whole_answer_in_hand_is_counted_at_once_and_passed_as_it_is() -> None:
    body = orjson.dumps({"choices": [], "usage": USAGE})
    used: list[Usage | None] = []
    whole = Whole(body)
    passed = metered(whole, False, 100, used.append)
    assert used == [Usage(12, 30)]  # before any byte has passed: it was computed already
    assert passed is whole
    assert [c async for c in passed] == [body]
    assert await joined(Whole(body)) == body
    assert await joined(chunks_of(body[:5], body[5:])) == body


async def test_a_whole_answer_reports_its_usage() -> None:
    body = orjson.dumps({"choices": [], "usage": USAGE})
    passed, used = await run(False, body[:10], body[10:])
    assert passed == body
    assert used == [Usage(12, 30)]


async def test_a_whole_answer_without_usage_is_unknown() -> None:
    assert (await run(False, b'{"choices": []}'))[1] == [None]
    assert (await run(False, b"not json"))[1] == [None]


async def test_only_a_total_counts_as_prompt_tokens() -> None:
    body = orjson.dumps({"usage": {"total_tokens": 9}})
    assert (await run(False, body))[1] == [Usage(9, 0)]


async def test_total_is_prompt_plus_completion_when_total_is_missing() -> None:
    body = orjson.dumps({"usage": {"prompt_tokens": 5, "completion_tokens": 7}})
    assert (await run(False, body))[1] == [Usage(5, 7)]


async def test_a_stream_reports_the_usage_chunk_even_cut_in_two() -> None:
    usage = event({"choices": [], "usage": USAGE})
    parts = (delta("a"), delta("b"), usage[:15], usage[15:], b"data: [DONE]\n\n")
    passed, used = await run(True, *parts)
    assert passed == b"".join(parts)
    assert used == [Usage(12, 30)]


async def test_a_stream_without_usage_counts_its_content_chunks() -> None:
    parts = (
        event({"choices": [{"delta": {"role": "assistant"}}]}),
        delta("a"),
        delta("b"),
        delta("c"),
        b"data: [DONE]\n\n",
    )
    assert (await run(True, *parts))[1] == [Usage(100, 3)]  # the prompt estimate + 3 pieces


async def test_closing_the_wrapper_closes_the_answer_it_wraps() -> None:
    """A client that leaves mid-stream must still stop the upstream at once."""
    closed = []

    async def upstream() -> AsyncIterator[bytes]:
        try:
            for _ in range(100):
                yield delta("x")
        finally:
            closed.append(True)

    used: list[Usage | None] = []
    wrapped = metered(upstream(), True, 0, used.append)
    async with contextlib.aclosing(wrapped):  # type: ignore[type-var]
        async for _ in wrapped:
            break
    assert closed == [True]
    assert used == [Usage(0, 1)]
