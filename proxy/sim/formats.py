"""The wire formats the simulator speaks: OpenAI chat and completions, Ollama chat and generate.

A format renders one request's answer either whole or as a stream of pieces (SSE events for
OpenAI, NDJSON lines for Ollama), and renders errors the way that API does. An answer has one
choice per sequence: a batched completions request (`prompt` an array) runs one sequence per
prompt, and choice `i` answers prompt `i`; every other request has one.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import orjson

from proxy.errors import APIError
from proxy.sim.engine import Sequence
from proxy.sim.logprobs import entry
from proxy.sim.tokens import OutputPlan, ToolCall

SSE = "text/event-stream"
NDJSON = "application/x-ndjson"
JSON = "application/json"


class WireFormat(Protocol):
    def media_type(self, stream: bool) -> str: ...

    def first(self) -> bytes: ...

    def piece(self, seq: Sequence, position: int, index: int = 0) -> bytes:
        """Token `position` of choice `index` (its sequence `seq`), which knows whether it is
        the choice's last (token_at)."""
        ...

    def end(self, seq: Sequence, index: int = 0) -> bytes:
        """What closes choice `index` once its sequence has finished."""
        ...

    def last(self, seqs: tuple[Sequence, ...]) -> bytes:
        """What closes the stream once every choice has ended."""
        ...

    def whole(self, seqs: tuple[Sequence, ...]) -> bytes: ...

    def error(self, error: APIError, streaming: bool) -> bytes: ...


def token_at(seq: Sequence, position: int) -> tuple[str, str | None]:
    """A generated token, and the finish reason when it is the sequence's last."""
    final = seq.ended and position + 1 == seq.generated
    return seq.output.tokens[position], seq.finish_reason if final else None


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
    logprobs: int | None = None  # top_logprobs per token of a chat answer; None: not asked for

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

    def piece(self, seq: Sequence, position: int, index: int = 0) -> bytes:
        text, reason = token_at(seq, position)
        finish = reason if self.vllm_style else None
        if not self.chat:
            return self._chunk({"text": text, "finish_reason": finish}, index)
        if (call := seq.output.call) is not None:
            delta = self._call_delta(call, seq.output, position, index)
            if delta is None and finish is None:
                return b""  # a token of the call's name: sent once the name is whole
            return self._chunk({"delta": delta or {}, "finish_reason": finish}, index)
        choice: dict[str, Any] = {"delta": {"content": text}, "finish_reason": finish}
        if self.logprobs is not None:
            choice["logprobs"] = self._logprobs([entry(text, position, self.logprobs)])
        return self._chunk(choice, index)

    def _call_delta(
        self, call: ToolCall, plan: OutputPlan, position: int, index: int
    ) -> dict[str, Any] | None:
        """The call's opening (its name whole) or a piece of its arguments; None within the
        name. An answer makes one call: its index is 0."""
        if position + 1 < plan.name_tokens:
            return None
        if position + 1 == plan.name_tokens:
            sent = self._tool_call(ToolCall(call.name, ""), index)
        else:
            sent = {"function": {"arguments": plan.tokens[position]}}
        return {"tool_calls": [{"index": 0, **sent}]}

    def _tool_call(self, call: ToolCall, index: int) -> dict[str, Any]:
        # Same request ID, same call ID: an answer sent again is the same bytes.
        digest = hashlib.blake2b(f"{self.request_id}\x00{index}".encode(), digest_size=12)
        return {
            "id": f"call_{digest.hexdigest()}",
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments},
        }

    def _logprobs(self, content: list[dict[str, Any]]) -> dict[str, Any]:
        # OpenAI says `refusal` too; vLLM only `content`.
        return {"content": content} if self.vllm_style else {"content": content, "refusal": None}

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
            content: dict[str, Any] = {"message": self._message(seq, index)}
        else:
            content = {"text": text}
        logprobs = self._whole_logprobs(seq)
        return {"index": index, **content, "logprobs": logprobs, "finish_reason": seq.finish_reason}

    def _message(self, seq: Sequence, index: int) -> dict[str, Any]:
        plan = seq.output
        if plan.call is None:
            return {"role": "assistant", "content": "".join(plan.tokens[: seq.generated])}
        call = plan.call_so_far(seq.generated)
        if call is None:  # cut short (max_tokens) before the name was whole: no call made
            return {"role": "assistant", "content": ""}
        return {"role": "assistant", "content": None, "tool_calls": [self._tool_call(call, index)]}

    def _whole_logprobs(self, seq: Sequence) -> dict[str, Any] | None:
        """Every text token's entry; none for a tool call (logprobs describe content)."""
        if not self.chat or self.logprobs is None or seq.output.call is not None:
            return None
        tokens = seq.output.tokens[: seq.generated]
        return self._logprobs([entry(t, i, self.logprobs) for i, t in enumerate(tokens)])

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

    def piece(self, seq: Sequence, position: int, index: int = 0) -> bytes:
        text, _ = token_at(seq, position)
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
