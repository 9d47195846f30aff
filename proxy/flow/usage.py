"""The tokens an answer used, read as it passes to the client (it is never held back for this).

An answer reports its usage: a whole answer in its body, a stream in a chunk near its end when
the client asked for `stream_options.include_usage`. A stream that reports none is counted as
prompt estimate plus one token per content chunk, which is how vLLM and Ollama stream. The
wrapper closes the answer it wraps when it is closed itself, so a client that leaves still stops
the upstream at once.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import orjson

from proxy.flow.streaming import events
from proxy.flow.whole import Whole
from proxy.legs.sse import EventSplitter


@dataclass(frozen=True)
class Usage:
    prompt: int
    completion: int

    @property
    def total(self) -> int:
        return self.prompt + self.completion


Used = Callable[[Usage | None], None]  # called once, when the answer has passed (None: unknown)


def metered(
    chunks: AsyncIterator[bytes], stream: bool, prompt_estimate: int, used: Used
) -> AsyncIterator[bytes]:
    if isinstance(chunks, Whole):  # in hand: counted now (it was computed whatever follows)
        used(_counted(_usage_of(chunks.body)))
        return chunks
    return _metered_stream(chunks, prompt_estimate, used) if stream else _metered_body(chunks, used)


async def _metered_body(chunks: AsyncIterator[bytes], used: Used) -> AsyncIterator[bytes]:
    parts = []
    try:
        async with contextlib.aclosing(chunks):  # type: ignore[type-var]
            async for chunk in chunks:
                parts.append(chunk)
                yield chunk
    finally:
        used(_counted(_usage_of(b"".join(parts))))


async def _metered_stream(
    chunks: AsyncIterator[bytes], prompt_estimate: int, used: Used
) -> AsyncIterator[bytes]:
    splitter, pieces = EventSplitter(), 0
    reported_usage: Usage | None = None
    try:
        async with contextlib.aclosing(chunks):  # type: ignore[type-var]
            async for chunk in chunks:
                complete = splitter.feed(chunk)
                if complete:  # whole events: counted without parsing, unless they hold usage
                    pieces += _pieces(complete)
                    if b'"usage"' in complete:
                        reported_usage = _reported(complete) or reported_usage
                yield chunk
    finally:
        used(reported_usage or Usage(prompt_estimate, pieces))


def _pieces(complete: bytes) -> int:
    """The events that carry text (a token each, as engines stream), among whole events."""
    return sum(b'"content"' in event or b'"text"' in event for event in complete.split(b"\n\n"))


def _reported(complete: bytes) -> Usage | None:
    """The last usage the events report, if any."""
    reported = None
    for payload in events(complete):
        if b'"usage"' in payload:
            reported = _counted(_usage_of(payload)) or reported
    return reported


def _usage_of(payload: bytes) -> dict[str, object] | None:
    try:
        document = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return None
    usage = document.get("usage") if isinstance(document, dict) else None
    return usage if isinstance(usage, dict) else None


def _counted(usage: dict[str, object] | None) -> Usage | None:
    if usage is None:
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if isinstance(prompt, int) or isinstance(completion, int):
        return Usage(
            prompt if isinstance(prompt, int) else 0,
            completion if isinstance(completion, int) else 0,
        )
    total = usage.get("total_tokens")
    return Usage(total, 0) if isinstance(total, int) else None
