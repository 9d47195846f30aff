"""The wire formats the simulator speaks: OpenAI chat and completions, Ollama chat and generate.

A format renders one request's answer either whole or as a stream of pieces (SSE events for
OpenAI, NDJSON lines for Ollama), and renders errors the way that API does.
"""

from __future__ import annotations

import time
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

    def piece(self, text: str, finish_reason: str | None = None) -> bytes:
        """One token; `finish_reason` is given with the answer's last token."""
        ...

    def last(self, seq: Sequence) -> bytes: ...

    def whole(self, seq: Sequence) -> bytes: ...

    def error(self, error: APIError, streaming: bool) -> bytes: ...


def usage(seq: Sequence) -> dict[str, Any]:
    return {
        "prompt_tokens": len(seq.prompt),
        "completion_tokens": seq.generated,
        "total_tokens": len(seq.prompt) + seq.generated,
        "prompt_tokens_details": {"cached_tokens": seq.cached_tokens},
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

    def _chunk(self, choice: dict[str, Any]) -> bytes:
        payload: dict[str, Any] = {
            "id": self.id,
            "object": self.object,
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "logprobs": None, **choice}],
        }
        if self.include_usage and not self.vllm_style:
            payload["usage"] = None
        return _sse(payload)

    def first(self) -> bytes:
        if not self.chat:
            return b""
        return self._chunk({"delta": {"role": "assistant", "content": ""}, "finish_reason": None})

    def piece(self, text: str, finish_reason: str | None = None) -> bytes:
        finish = finish_reason if self.vllm_style else None
        if self.chat:
            return self._chunk({"delta": {"content": text}, "finish_reason": finish})
        return self._chunk({"text": text, "finish_reason": finish})

    def last(self, seq: Sequence) -> bytes:
        out = b""
        if not (self.vllm_style and seq.generated and seq.finish_reason != "abort"):
            end: dict[str, Any] = {"delta": {}} if self.chat else {"text": ""}
            out = self._chunk({**end, "finish_reason": seq.finish_reason})
        if self.include_usage:
            out += _sse(
                {
                    "id": self.id,
                    "object": self.object,
                    "created": self.created,
                    "model": self.model,
                    "choices": [],
                    "usage": usage(seq),
                }
            )
        return out + b"data: [DONE]\n\n"

    def whole(self, seq: Sequence) -> bytes:
        text = "".join(seq.output.tokens[: seq.generated])
        if self.chat:
            choice: dict[str, Any] = {"message": {"role": "assistant", "content": text}}
        else:
            choice = {"text": text}
        return orjson.dumps(
            {
                "id": self.id,
                "object": "chat.completion" if self.chat else "text_completion",
                "created": self.created,
                "model": self.model,
                "choices": [
                    {"index": 0, **choice, "logprobs": None, "finish_reason": seq.finish_reason}
                ],
                "usage": usage(seq),
            }
        )

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

    def piece(self, text: str, finish_reason: str | None = None) -> bytes:
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

    def last(self, seq: Sequence) -> bytes:
        return orjson.dumps(self._line("", True, self._summary(seq))) + b"\n"

    def whole(self, seq: Sequence) -> bytes:
        text = "".join(seq.output.tokens[: seq.generated])
        return orjson.dumps(self._line(text, True, self._summary(seq)))

    def error(self, error: APIError, streaming: bool) -> bytes:
        body = orjson.dumps({"error": error.message})
        return body + b"\n" if streaming else body
