"""A cloud answer to a redacted request, with its placeholders restored before the client sees
it (the Answer protocol): a whole answer's messages and tool-call arguments, or a stream event
by event, each choice's text passing as it comes but for a tail that may be a placeholder split
across two events (policies/redaction.py: Unmasker)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from policies.redaction import Placeholders, Unmasker
from proxy.legs.answer import Answer

_DONE = b"[DONE]"


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
        pending = b""
        async for chunk in self.inner.chunks():
            pending += chunk
            *events, pending = pending.split(b"\n\n")
            for event in events:
                yield self._event(event) + b"\n\n"
        if pending:
            yield self._event(pending)

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
