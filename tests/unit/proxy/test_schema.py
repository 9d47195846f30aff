"""proxy/schema.py:
request bodies checked only where routing relies on them, else untouched."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from proxy.endpoints import Endpoint
from proxy.errors import BadRequest
from proxy.schema import ProxyRequest, parse_request

CHAT: dict[str, Any] = {
    "model": "llama",
    "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "t1"}]},
    ],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
    "response_format": {"type": "json_object"},
    "logprobs": True,
    "seed": 7,
    "temperature": 0.2,
    "max_tokens": 0,
    "x_future_field": {"nested": [1, None, "é"]},
}
COMPLETION: dict[str, Any] = {"model": "llama", "prompt": [1, 2, 3], "echo": True, "n": 2}
EMBEDDING: dict[str, Any] = {"model": "embed", "input": ["a", "b"], "dimensions": 64}


def parse(endpoint: Endpoint, body: Any) -> ProxyRequest:
    return parse_request(endpoint, orjson.dumps(body))


def rejection(endpoint: Endpoint, raw: bytes) -> BadRequest:
    with pytest.raises(BadRequest) as caught:
        parse_request(endpoint, raw)
    return caught.value


@pytest.mark.parametrize(
    ("endpoint", "body", "path"),
    [
        ("chat", CHAT, "/v1/chat/completions"),
        ("completions", COMPLETION, "/v1/completions"),
        ("embeddings", EMBEDDING, "/v1/embeddings"),
    ],
)
def test_valid_body_is_kept_whole(endpoint: Endpoint, body: dict[str, Any], path: str) -> None:
    request = parse(endpoint, body)
    assert request.body == body
    assert (request.endpoint, request.model, request.stream) == (endpoint, body["model"], False)
    assert request.path == path


@pytest.mark.parametrize(("stream", "expected"), [(True, True), (False, False), (None, False)])
def test_stream_flag(stream: bool | None, expected: bool) -> None:
    request = parse("chat", {**CHAT, "stream": stream})
    assert request.stream is expected
    assert request.body["stream"] == stream


def test_completions_prompt_may_be_a_string() -> None:
    assert parse("completions", {"model": "m", "prompt": "once upon"}).body["prompt"] == "once upon"


def test_embeddings_input_may_be_a_string() -> None:
    assert parse("embeddings", {"model": "m", "input": "text"}).model == "m"


# (endpoint, body, param, message fragment)
INVALID: dict[str, tuple[Endpoint, dict[str, Any], str, str]] = {
    "model missing": ("chat", {"messages": CHAT["messages"]}, "model", "'model' is required"),
    "model empty": ("chat", {**CHAT, "model": ""}, "model", "non-empty string"),
    "model a number": ("embeddings", {**EMBEDDING, "model": 3}, "model", "'model'"),
    "model checked first": ("chat", {}, "model", "'model'"),
    "messages missing": ("chat", {"model": "m"}, "messages", "non-empty array"),
    "messages empty": ("chat", {"model": "m", "messages": []}, "messages", "non-empty array"),
    "messages an object": ("chat", {"model": "m", "messages": {}}, "messages", "'messages'"),
    "message not an object": (
        "chat",
        {"model": "m", "messages": [{"role": "user", "content": "a"}, "hi"]},
        "messages[1]",
        "'messages[1]' must be an object",
    ),
    "message without role": (
        "chat",
        {"model": "m", "messages": [{"content": "a"}]},
        "messages[0].role",
        "is required and must be a string",
    ),
    "message content a number": (
        "chat",
        {"model": "m", "messages": [{"role": "user", "content": 5}]},
        "messages[0].content",
        "a string or an array of content parts",
    ),
    "stream a string": ("chat", {**CHAT, "stream": "yes"}, "stream", "must be a boolean"),
    "stream a number": ("completions", {**COMPLETION, "stream": 1}, "stream", "boolean"),
    "streamed embeddings": (
        "embeddings",
        {**EMBEDDING, "stream": True},
        "stream",
        "embeddings cannot be streamed",
    ),
    "max_tokens negative": ("chat", {**CHAT, "max_tokens": -1}, "max_tokens", "non-negative"),
    "max_tokens a bool": ("chat", {**CHAT, "max_tokens": True}, "max_tokens", "integer"),
    "max_tokens a float": ("completions", {**COMPLETION, "max_tokens": 1.5}, "max_tokens", "int"),
    "max_tokens a string": ("chat", {**CHAT, "max_tokens": "10"}, "max_tokens", "integer"),
    "max_completion_tokens negative": (
        "chat",
        {**CHAT, "max_completion_tokens": -5},
        "max_completion_tokens",
        "'max_completion_tokens' must be a non-negative integer",
    ),
    "prompt missing": ("completions", {"model": "m"}, "prompt", "string or an array"),
    "prompt a number": ("completions", {"model": "m", "prompt": 5}, "prompt", "'prompt'"),
    "input missing": ("embeddings", {"model": "m"}, "input", "string or an array"),
    "input an object": ("embeddings", {"model": "m", "input": {"a": 1}}, "input", "'input'"),
}


@pytest.mark.parametrize(
    ("endpoint", "body", "param", "fragment"), INVALID.values(), ids=INVALID.keys()
)
def test_invalid_body_is_a_bad_request_naming_the_param(
    endpoint: Endpoint, body: dict[str, Any], param: str, fragment: str
) -> None:
    error = rejection(endpoint, orjson.dumps(body))
    assert (error.status, error.param) == (400, param)
    assert fragment in error.message


@pytest.mark.parametrize("raw", [b"[1, 2]", b'"text"', b"null", b"42", b"true"])
def test_json_that_is_not_an_object_is_rejected(raw: bytes) -> None:
    error = rejection("chat", raw)
    assert error.message == "request body must be a JSON object"
    assert error.param is None


@pytest.mark.parametrize("raw", [b"", b"{", b"model=llama", b'{"model": "m",}', b"\xff\xfe"])
def test_body_that_is_not_json_is_rejected(raw: bytes) -> None:
    error = rejection("completions", raw)
    assert error.message.startswith("request body is not valid JSON")
    assert error.param is None


def test_upstream_body_rewrites_only_the_model() -> None:
    request = parse("chat", CHAT)
    rewritten = orjson.loads(request.upstream_body("meta-llama/Llama-3.1-8B-Instruct"))
    assert rewritten == {**CHAT, "model": "meta-llama/Llama-3.1-8B-Instruct"}
    assert list(rewritten) == list(CHAT)  # field order kept


def test_upstream_body_leaves_the_request_unchanged() -> None:
    request = parse("embeddings", EMBEDDING)
    request.upstream_body("engine-name")
    assert request.body["model"] == "embed"
    assert request.model == "embed"


def test_upstream_body_for_the_same_model_is_the_body_itself() -> None:
    request = parse("completions", COMPLETION)
    assert request.upstream_body("llama") == orjson.dumps(COMPLETION)
