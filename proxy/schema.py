"""OpenAI request bodies -> ProxyRequest, checking only what the proxy relies on (pure).

The body is forwarded as it came (tools, response_format, logprobs, seed and any field a newer
API adds pass through untouched); only the fields routing reads are validated, with a 400 that
names the parameter.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import orjson

from policies.tags import hidden_tags, may_hide_tags
from proxy.endpoints import ENDPOINTS, Endpoint
from proxy.errors import BadRequest

# Longest model name accepted: names are keys of per-model bookkeeping, so they are bounded.
MAX_MODEL_CHARS = 256
# Deepest nesting of arrays and objects accepted in a body (OpenAI's own bodies need under 10;
# the JSON schemas inside tools and response formats a few more).
MAX_DEPTH = 64

# Assumed answer length when a request sets no max_tokens (for wait predictions only).
DEFAULT_ANSWER_TOKENS = 256
# Bodies up to this size have their prompt measured as JSON (orjson, up to ~1.4 ns a byte here:
# a third of a millisecond at most); a larger one is estimated from its size, in no time (its
# prompt is most of it).
MEASURED_PROMPT_BYTES = 256 * 1024


@dataclass(frozen=True)
class ProxyRequest:
    endpoint: Endpoint
    model: str
    stream: bool
    body: dict[str, Any]
    size: int = 0  # bytes of the body as it arrived

    @property
    def path(self) -> str:
        return ENDPOINTS[self.endpoint].path

    @cached_property  # read by routing, the gate and the meter: the body is dumped once
    def token_estimate(self) -> int:
        """Prompt tokens plus the answer's budget: the request's work in tokens, for predicting
        waits and charging rate limits (an estimate: the engine's own count comes later)."""
        return self.prompt_estimate + self.answer_estimate

    @property
    def answer_estimate(self) -> int:
        """The answers' budget: max tokens, else a typical answer's length, for each answer."""
        limit = self.answer_limit
        return (DEFAULT_ANSWER_TOKENS if limit is None else limit) * self.answers

    @property
    def answers(self) -> int:
        """How many answers the call makes: one per prompt of a batch, times `n`, times
        `best_of` (computed and billed, though one is returned)."""
        prompt = self.body.get("prompt")
        prompts = len(prompt) if isinstance(prompt, list) and prompt else 1
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], int):
            prompts = 1  # one prompt given as token ids
        return prompts * _count(self.body.get("n")) * _count(self.body.get("best_of"))

    @property
    def answer_limit(self) -> int | None:
        """The max tokens the request sets, if it sets any."""
        limit = self.body.get("max_completion_tokens") or self.body.get("max_tokens")
        return limit if isinstance(limit, int) and not isinstance(limit, bool) else None

    @cached_property
    def prompt_estimate(self) -> int:
        """Prompt tokens, at about 4 characters each, of everything the model reads: the body
        as JSON (messages or prompts, and tools, schemas, predictions: 40,000 words of tools
        were priced as nothing), or its size past MEASURED_PROMPT_BYTES."""
        if self.size > MEASURED_PROMPT_BYTES:
            return self.size // 4
        return len(orjson.dumps(self.body)) // 4

    def upstream_body(self, upstream_model: str) -> bytes:
        if upstream_model == self.model:
            return orjson.dumps(self.body)
        return orjson.dumps({**self.body, "model": upstream_model})


def parse_request(endpoint: Endpoint, raw: bytes) -> ProxyRequest:
    body = decode_json(raw)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("'model' is required and must be a non-empty string", param="model")
    if len(model) > MAX_MODEL_CHARS:
        raise BadRequest(
            f"'model' is {len(model)} characters long; at most {MAX_MODEL_CHARS}", param="model"
        )
    spec = ENDPOINTS[endpoint]
    spec.check(body)
    stream = body.get("stream", False)
    if stream is not None and not isinstance(stream, bool):
        raise BadRequest("'stream' must be a boolean", param="stream")
    if stream and not spec.streams:
        raise BadRequest(f"{endpoint} cannot be streamed", param="stream")
    _check_optional_int(body, "max_tokens")
    _check_optional_int(body, "max_completion_tokens")
    if may_hide_tags(raw) and (where := hidden_tags(body)) is not None:
        raise BadRequest(
            f"{where} holds Unicode tag characters (U+E0000 to U+E007F) outside an emoji flag: "
            "text a model reads but people and checks do not see; send it as plain text",
            param=where,
            code="hidden_text",
        )
    return ProxyRequest(endpoint, model, bool(stream), body, len(raw))


def decode_json(raw: bytes) -> dict[str, Any]:
    """A request body as a JSON object, or a 400 saying why not."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"request body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    # A document nests no deeper than it has brackets (counted in C, strings' too): most
    # bodies have a handful, and skip the walk.
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH and _depth_exceeds(body, MAX_DEPTH):
        raise BadRequest(f"request body is nested more than {MAX_DEPTH} levels deep")
    return body


def _depth_exceeds(document: Any, limit: int) -> bool:
    """One level at a time, each gathered by one comprehension (a value costs one type check,
    a fifth of a stack walk's push and pop; orjson makes plain dicts and lists only); no
    recursion, so it cannot run out of stack."""
    level = [document]
    for _ in range(limit):
        level = [
            child
            for value in level
            for child in (value.values() if type(value) is dict else value)
            if type(child) is dict or type(child) is list
        ]
        if not level:
            return False
    return True


def _check_optional_int(body: dict[str, Any], name: str) -> None:
    value = body.get(name)
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadRequest(f"'{name}' must be a non-negative integer", param=name)


def _count(value: object) -> int:
    """A client's count (n, best_of): at least one."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 1 else 1
