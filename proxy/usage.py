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

import orjson

from proxy.streaming import events

Used = Callable[[int | None], None]  # called once, when the answer has passed: tokens or None


def metered(
    chunks: AsyncIterator[bytes], stream: bool, prompt_estimate: int, used: Used
) -> AsyncIterator[bytes]:
    return _metered_stream(chunks, prompt_estimate, used) if stream else _metered_body(chunks, used)


async def _metered_body(chunks: AsyncIterator[bytes], used: Used) -> AsyncIterator[bytes]:
    parts = []
    try:
        async with contextlib.aclosing(chunks):  # type: ignore[type-var]
            async for chunk in chunks:
                parts.append(chunk)
                yield chunk
    finally:
        used(_total(_usage_of(b"".join(parts))))


async def _metered_stream(
    chunks: AsyncIterator[bytes], prompt_estimate: int, used: Used
) -> AsyncIterator[bytes]:
    pending, reported, pieces = b"", None, 0
    try:
        async with contextlib.aclosing(chunks):  # type: ignore[type-var]
            async for chunk in chunks:
                pending += chunk
                complete, _, pending = pending.rpartition(b"\n\n")
                for payload in events(complete):
                    if payload == b"[DONE]":
                        continue
                    usage = _usage_of(payload) if b'"usage"' in payload else None
                    reported = _total(usage) if usage else reported
                    pieces += b'"content"' in payload or b'"text"' in payload
                yield chunk
    finally:
        used(reported if reported is not None else prompt_estimate + pieces)


def _usage_of(payload: bytes) -> dict[str, object] | None:
    try:
        document = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return None
    usage = document.get("usage") if isinstance(document, dict) else None
    return usage if isinstance(usage, dict) else None


def _total(usage: dict[str, object] | None) -> int | None:
    if usage is None:
        return None
    total = usage.get("total_tokens")
    if isinstance(total, int):
        return total
    parts = [usage.get("prompt_tokens"), usage.get("completion_tokens")]
    return (
        sum(p for p in parts if isinstance(p, int))
        if any(isinstance(p, int) for p in parts)
        else None
    )
