"""Anthropic's Messages API on the wire: a message whole, as a stream of named SSE events, and
errors in Anthropic's shape (pure: no I/O).

A stream is `message_start`, `content_block_start`, `ping`, one `content_block_delta` per token,
`content_block_stop`, `message_delta` (the stop reason and the output tokens) and
`message_stop`, each as `event: NAME` and `data: JSON`; an error is
`{"type": "error", "error": {"type", "message"}}`, its type named after the HTTP status.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from proxy.errors import APIError
from proxy.sim.engine import Sequence
from proxy.sim.formats import JSON, SSE, token_at

# Anthropic's error types, by HTTP status (its 529 is "overloaded"; the simulator's 503 too).
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def error_type(status: int) -> str:
    return ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def error_body(status: int, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type(status), "message": message}}


def event(name: str, payload: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


def stop_reason(seq: Sequence) -> str:
    """Anthropic's names: the answer ended by itself, at a stop sequence, or at max_tokens."""
    if seq.output.stop_sequence is not None:
        return "stop_sequence"
    return "max_tokens" if seq.finish_reason == "length" else "end_turn"


@dataclass
class AnthropicFormat:
    """Responses of POST /v1/messages (a WireFormat, as proxy/sim/formats.py's)."""

    request_id: str
    model: str
    input_tokens: int  # known before the sequence runs: message_start reports it

    @property
    def id(self) -> str:
        return f"msg_{self.request_id}"

    def media_type(self, stream: bool) -> str:
        return SSE if stream else JSON

    def _message(self, content: list[dict[str, Any]], output_tokens: int) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": self.input_tokens, "output_tokens": output_tokens},
        }

    def first(self) -> bytes:
        return (
            event("message_start", {"type": "message_start", "message": self._message([], 1)})
            + event(
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": _text("")},
            )
            + event("ping", {"type": "ping"})
        )

    def piece(self, seq: Sequence, position: int, index: int = 0) -> bytes:
        text, _ = token_at(seq, position)
        delta = {"type": "text_delta", "text": text}
        return event(
            "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
        )

    def end(self, seq: Sequence, index: int = 0) -> bytes:
        delta = {"stop_reason": stop_reason(seq), "stop_sequence": seq.output.stop_sequence}
        return (
            event("content_block_stop", {"type": "content_block_stop", "index": 0})
            + event(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": delta,
                    "usage": {"output_tokens": seq.generated},
                },
            )
            + event("message_stop", {"type": "message_stop"})
        )

    def last(self, seqs: tuple[Sequence, ...]) -> bytes:
        return b""

    def whole(self, seqs: tuple[Sequence, ...]) -> bytes:
        (seq,) = seqs  # a message has one answer
        text = "".join(seq.output.tokens[: seq.generated])
        message = self._message([_text(text)], seq.generated)
        message["stop_reason"] = stop_reason(seq)
        message["stop_sequence"] = seq.output.stop_sequence
        return orjson.dumps(message)

    def error(self, error: APIError, streaming: bool) -> bytes:
        body = error_body(error.status, error.message)
        return event("error", body) if streaming else orjson.dumps(body)


def _text(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}
