"""The wire formats the simulator speaks: OpenAI chat and completions, Ollama chat and generate.

A format renders one request's answer either whole or as a stream of pieces (SSE events for
OpenAI, NDJSON lines for Ollama), and renders errors the way that API does. An answer has one
choice per sequence: a batched completions request (`prompt` an array) runs one sequence per
prompt, and choice `i` answers prompt `i`; every other request has one.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import orjson

from proxy.errors import APIError
from proxy.sim.engine import Sequence

SSE = "text/event-stream"
NDJSON = "application/x-ndjson"
JSON = "application/json"


class WireFormat(Protocol):
    def media_type(self, stream: bool) -> str: ...

    def first(self) -> bytes: ...

    def piece(self, text: str, finish_reason: str | None = None, index: int = 0) -> bytes:
        """One token of choice `index`; `finish_reason` is given with the choice's last token."""
        ...

    def end(self, seq: Sequence, index: int = 0) -> bytes:
        """What closes choice `index` once its sequence has finished."""
        ...

    def last(self, seqs: tuple[Sequence, ...]) -> bytes:
        """What closes the stream once every choice has ended."""
        ...

    def whole(self, seqs: tuple[Sequence, ...]) -> bytes: ...

    def error(self, error: APIError, streaming: bool) -> bytes: ...


def usage(seqs: Iterable[Sequence]) -> dict[str, Any]:
    """A request's usage: every prompt's tokens and every choice's, summed."""
    prompt = completion = cached = 0
    for seq in seqs:
        prompt += len(seq.prompt)
        completion += seq.generated
        cached += seq.cached_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def _sse(payload: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


@dataclass
class OpenAIFormat:
    """OpenAI chat completions (`chat=True`) or legacy completions, as vLLM and Ollama's /v1 do."""

    request_id: str
    model: str
    chat: bool
    include_usage: bool = False
    # vLLM puts finish_reason on the last token's chunk and leaves `usage` out of the other
    # chunks; OpenAI sends a separate closing chunk and `"usage": null` on every chunk.
    vllm_style: bool = False

    def __post_init__(self) -> None:
        self.created = int(time.time())
        prefix = "chatcmpl" if self.chat else "cmpl"
        self.id = f"{prefix}-{self.request_id}"
        self.object = "chat.completion.chunk" if self.chat else "text_completion"

    def media_type(self, stream: bool) -> str:
        return SSE if stream else JSON

    def _chunk(self, choice: dict[str, Any], index: int = 0) -> bytes:
        payload: dict[str, Any] = {
            "id": self.id,
            "object": self.object,
            "created": self.created,
            "model": self.model,
            "choices": [{"index": index, "logprobs": None, **choice}],
        }
        if self.include_usage and not self.vllm_style:
            payload["usage"] = None
        return _sse(payload)

    def first(self) -> bytes:
        if not self.chat:
            return b""
        return self._chunk({"delta": {"role": "assistant", "content": ""}, "finish_reason": None})

    def piece(self, text: str, finish_reason: str | None = None, index: int = 0) -> bytes:
        finish = finish_reason if self.vllm_style else None
        if self.chat:
            return self._chunk({"delta": {"content": text}, "finish_reason": finish}, index)
        return self._chunk({"text": text, "finish_reason": finish}, index)

    def end(self, seq: Sequence, index: int = 0) -> bytes:
        if self.vllm_style and seq.generated and seq.finish_reason != "abort":
            return b""  # the finish_reason went out with the last token
        end: dict[str, Any] = {"delta": {}} if self.chat else {"text": ""}
        return self._chunk({**end, "finish_reason": seq.finish_reason}, index)

    def last(self, seqs: tuple[Sequence, ...]) -> bytes:
        out = b""
        if self.include_usage:
            out = _sse(
                {
                    "id": self.id,
                    "object": self.object,
                    "created": self.created,
                    "model": self.model,
                    "choices": [],
                    "usage": usage(seqs),
                }
            )
        return out + b"data: [DONE]\n\n"

    def whole(self, seqs: tuple[Sequence, ...]) -> bytes:
        return orjson.dumps(
            {
                "id": self.id,
                "object": "chat.completion" if self.chat else "text_completion",
                "created": self.created,
                "model": self.model,
                "choices": [self._choice(seq, index) for index, seq in enumerate(seqs)],
                "usage": usage(seqs),
            }
        )

    def _choice(self, seq: Sequence, index: int) -> dict[str, Any]:
        text = "".join(seq.output.tokens[: seq.generated])
        if self.chat:
            content: dict[str, Any] = {"message": {"role": "assistant", "content": text}}
        else:
            content = {"text": text}
        return {"index": index, **content, "logprobs": None, "finish_reason": seq.finish_reason}

    def error(self, error: APIError, streaming: bool) -> bytes:
        return _sse(error.body()) if streaming else error.render()


def _ns(seconds: float) -> int:
    return max(0, int(seconds * 1e9))


@dataclass
class OllamaFormat:
    """Ollama's native /api/chat (`chat=True`) and /api/generate, NDJSON when streamed."""

    model: str
    chat: bool
    load_seconds: float = 0.0

    def media_type(self, stream: bool) -> str:
        return NDJSON if stream else JSON

    def _line(self, text: str, done: bool, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        line: dict[str, Any] = {
            "model": self.model,
            "created_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        }
        if self.chat:
            line["message"] = {"role": "assistant", "content": text}
        else:
            line["response"] = text
        line["done"] = done
        line.update(extra or {})
        return line

    def first(self) -> bytes:
        return b""

    def piece(self, text: str, finish_reason: str | None = None, index: int = 0) -> bytes:
        return orjson.dumps(self._line(text, False)) + b"\n"

    def _summary(self, seq: Sequence) -> dict[str, Any]:
        end = seq.finished_at or seq.arrival
        first = seq.first_token_at or end
        return {
            "done_reason": seq.finish_reason,
            "total_duration": _ns(end - seq.arrival),
            "load_duration": _ns(self.load_seconds),
            "prompt_eval_count": len(seq.prompt),
            "prompt_eval_duration": _ns(first - seq.arrival - self.load_seconds),
            "eval_count": seq.generated,
            "eval_duration": _ns(end - first),
        }

    def end(self, seq: Sequence, index: int = 0) -> bytes:
        return orjson.dumps(self._line("", True, self._summary(seq))) + b"\n"

    def last(self, seqs: tuple[Sequence, ...]) -> bytes:
        return b""

    def whole(self, seqs: tuple[Sequence, ...]) -> bytes:
        (seq,) = seqs  # Ollama's native API takes one prompt per request
        text = "".join(seq.output.tokens[: seq.generated])
        return orjson.dumps(self._line(text, True, self._summary(seq)))

    def error(self, error: APIError, streaming: bool) -> bytes:
        body = orjson.dumps({"error": error.message})
        return body + b"\n" if streaming else body
