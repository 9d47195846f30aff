"""A cloud answer to a redacted request, with its placeholders restored before the client sees
it (the Answer protocol): a whole answer's messages and tool-call arguments, or a stream event
by event, each choice's text passing as it comes but for a tail that may be a placeholder split
across two events (policies/redaction.py: Unmasker).

A stream's events are cut out of its chunks in linear time (proxy/legs/sse.py), and an event may
be at most MAX_EVENT_BYTES, a quarter of what a relay holds: each is parsed and restored on the
event loop, and a provider's events are a few tokens each. A larger one ends the stream as an
upstream error."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from policies.redaction import Placeholders, Unmasker
from proxy.errors import UpstreamUnreadable
from proxy.legs.answer import Answer
from proxy.legs.sse import EVENT_END, EventSplitter

_DONE = b"[DONE]"
MAX_EVENT_BYTES = 1024 * 1024


@dataclass
class RestoredAnswer:
    inner: Answer
    placeholders: Placeholders
    stream: bool = field(init=False)
    _unmaskers: dict[tuple[int, str], Unmasker] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.stream = self.inner.stream

    @property
    def status(self) -> int:
        return self.inner.status

    def headers(self) -> list[tuple[bytes, bytes]]:
        """The cloud's, and how many values left as placeholders (never which)."""
        count = str(len(self.placeholders.values)).encode()
        return [*self.inner.headers(), (b"x-overspill-redacted", count)]

    async def read(self) -> bytes:
        body = await self.inner.read()
        try:
            answer = orjson.loads(body)
        except orjson.JSONDecodeError:
            return body
        for choice in answer.get("choices") or []:
            message = choice.get("message") or {}
            for holder, key, _ in _texts(message):
                holder[key] = self.placeholders.restore(holder[key])
        return orjson.dumps(answer)

    async def chunks(self) -> AsyncIterator[bytes]:
        if not self.stream:
            yield await self.read()
            return
        splitter = EventSplitter(MAX_EVENT_BYTES)
        # closed at once when an event is too large: the cloud's stream ends (and is billed)
        async with contextlib.aclosing(self.inner.chunks()) as chunks:  # type: ignore[type-var]
            async for chunk in chunks:
                if whole := splitter.feed(chunk):
                    for event in whole[: -len(EVENT_END)].split(EVENT_END):
                        yield self._event(_bounded(event)) + EVENT_END
                if splitter.dropped:  # held past the bound, and let go
                    raise _too_long()
        if rest := splitter.rest():
            yield self._event(_bounded(rest))

    def close(self) -> None:
        self.inner.close()

    def _event(self, event: bytes) -> bytes:
        if not event.startswith(b"data: "):
            return event
        data = event[6:].strip()
        if data == _DONE:
            return self._held() + event
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            return event
        for choice in chunk.get("choices") or []:
            self._restore_choice(choice)
        return b"data: " + orjson.dumps(chunk)

    def _restore_choice(self, choice: dict[str, Any]) -> None:
        index = choice.get("index", 0)
        delta = choice.get("delta") or {}
        finished = choice.get("finish_reason") is not None
        for holder, key, label in _texts(delta):
            unmasker = self._unmaskers.setdefault((index, label), Unmasker(self.placeholders))
            holder[key] = unmasker.feed(holder[key]) + (unmasker.flush() if finished else "")
        if finished:  # a tail held back in a field this last delta did not carry
            carried = {label for _, _, label in _texts(delta)}
            for (held_index, label), unmasker in self._unmaskers.items():
                rest = unmasker.flush() if held_index == index and label not in carried else ""
                if rest:
                    _give_back(delta, label, rest)
                    choice["delta"] = delta

    def _held(self) -> bytes:
        """Whatever is still held back at the end of the stream, as one last event."""
        choices = []
        for (index, label), unmasker in self._unmaskers.items():
            rest = unmasker.flush()
            if rest:
                delta: dict[str, Any] = {}
                _give_back(delta, label, rest)
                choices.append({"index": index, "delta": delta})
        if not choices:
            return b""
        return (
            b"data: "
            + orjson.dumps({"object": "chat.completion.chunk", "choices": choices})
            + b"\n\n"
        )


def _texts(message: dict[str, Any]) -> list[tuple[dict[str, Any], str, str]]:
    """The text fields of a message or delta, each with a label that stays the same across a
    stream's deltas: its content, and each tool call's arguments."""
    found: list[tuple[dict[str, Any], str, str]] = []
    if isinstance(message.get("content"), str):
        found.append((message, "content", "content"))
    for position, call in enumerate(message.get("tool_calls") or []):
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and isinstance(function.get("arguments"), str):
            label = f"tool_calls[{call.get('index', position)}]"
            found.append((function, "arguments", label))
    return found


def _give_back(delta: dict[str, Any], label: str, rest: str) -> None:
    """Add held-back text to a delta, in the field its label names."""
    if label == "content":
        delta["content"] = (delta.get("content") or "") + rest
        return
    call_index = int(label.removeprefix("tool_calls[").removesuffix("]"))
    calls = delta.setdefault("tool_calls", [])
    calls.append({"index": call_index, "function": {"arguments": rest}})


def _bounded(event: bytes) -> bytes:
    """`event`, unless it is too long (it came whole in one chunk: the splitter never held it)."""
    if len(event) > MAX_EVENT_BYTES:
        raise _too_long()
    return event


def _too_long() -> UpstreamUnreadable:
    return UpstreamUnreadable(
        "the cloud target sent a stream event too long to restore",
        detail=f"over {MAX_EVENT_BYTES} bytes",
    )
