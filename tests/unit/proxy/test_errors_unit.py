"""proxy/errors.py: the error tree, its OpenAI rendering and the mapping of engine errors."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from proxy.errors import (
    APIError,
    BadRequest,
    InternalError,
    ModelNotFound,
    NoBackend,
    NotFound,
    Overloaded,
    PayloadTooLarge,
    RateLimited,
    Unauthorized,
    UpstreamDropped,
    UpstreamError,
    UpstreamStatus,
    UpstreamTimeout,
    UpstreamUnavailable,
    error_body,
)

ENGINE_400 = orjson.dumps(
    {
        "error": {
            "message": "This model's maximum context length is 4096 tokens.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
    }
)


def rendered(error: APIError) -> dict[str, Any]:
    body: dict[str, Any] = orjson.loads(error.render())
    return body


@pytest.mark.parametrize(
    ("cls", "status", "type_", "code"),
    [
        (APIError, 500, "server_error", None),
        (BadRequest, 400, "invalid_request_error", None),
        (Unauthorized, 401, "authentication_error", "invalid_api_key"),
        (NotFound, 404, "invalid_request_error", "not_found"),
        (ModelNotFound, 404, "invalid_request_error", "model_not_found"),
        (PayloadTooLarge, 413, "invalid_request_error", "request_too_large"),
        (InternalError, 500, "server_error", "internal_error"),
        (Overloaded, 503, "server_error", "overloaded"),
        (NoBackend, 503, "server_error", "no_backend_available"),
        (UpstreamError, 502, "upstream_error", "upstream_error"),
        (UpstreamUnavailable, 502, "upstream_error", "upstream_unavailable"),
        (UpstreamTimeout, 504, "upstream_error", "upstream_timeout"),
        (UpstreamDropped, 502, "upstream_error", "upstream_dropped"),
    ],
)
def test_error_class_status_type_code_and_rendering(
    cls: type[APIError], status: int, type_: str, code: str | None
) -> None:
    error = cls("it broke", param="messages")
    assert (error.status, error.type, error.code) == (status, type_, code)
    assert rendered(error) == {
        "error": {"message": "it broke", "type": type_, "param": "messages", "code": code}
    }


def test_param_defaults_to_null() -> None:
    assert rendered(NotFound("no such route")) == {
        "error": {
            "message": "no such route",
            "type": "invalid_request_error",
            "param": None,
            "code": "not_found",
        }
    }


def test_code_given_to_one_error_does_not_change_its_class() -> None:
    error = BadRequest("too long", code="context_length_exceeded")
    assert rendered(error)["error"]["code"] == "context_length_exceeded"
    assert BadRequest("other").code is None


def test_headers_are_not_shared_between_errors() -> None:
    first = Overloaded("busy")
    first.headers["X-Test"] = "1"
    assert Overloaded("busy").headers == {}


def test_error_message_is_the_exception_text() -> None:
    assert str(InternalError("database on fire")) == "database on fire"


def test_error_body_is_openai_shaped() -> None:
    assert error_body("m", "t") == {
        "error": {"message": "m", "type": "t", "param": None, "code": None}
    }
    assert error_body("m", "t", "p", "c")["error"] == {
        "message": "m",
        "type": "t",
        "param": "p",
        "code": "c",
    }


@pytest.mark.parametrize(
    ("retry_after", "header"),
    [(0.2, "1"), (2.5, "3"), (3.0, "3"), (0.0, "1"), (1.2, "2"), (59.6, "60"), (120.0, "120")],
)
def test_rate_limited_retry_after_is_rounded_up_to_whole_seconds(
    retry_after: float, header: str
) -> None:
    error = RateLimited("slow down", retry_after=retry_after)
    assert error.headers == {"Retry-After": header}
    assert error.retry_after == retry_after


def test_rate_limited_renders_a_429_rate_limit_error() -> None:
    error = RateLimited("slow down", retry_after=1, code="tokens_exceeded")
    assert error.status == 429
    assert rendered(error)["error"] == {
        "message": "slow down",
        "type": "rate_limit_error",
        "param": None,
        "code": "tokens_exceeded",
    }
    assert RateLimited("x", retry_after=1).code == "rate_limit_exceeded"


# An engine's or a provider's error: the status is kept, the words are the proxy's (issue 30,
# finding 9). What the upstream said goes to `detail`, which only the log shows.

LEAKY = (
    "Rate limit reached for gpt-4o-mini in organization org-Abc123XyZ on tokens per min. "
    "Key sk-proj-****wxyz, see https://platform.example/account"
)


def test_a_client_error_keeps_its_status_code_param_and_type_and_not_its_words() -> None:
    error = UpstreamStatus("gpu-1", 400, ENGINE_400, {})
    assert error.status == 400
    assert error.retryable is False
    assert rendered(error)["error"] == {
        "message": "gpu-1 answered 400",  # vLLM's code is the status again: not repeated
        "type": "BadRequestError",
        "param": None,
        "code": "400",
    }
    assert error.detail == "This model's maximum context length is 4096 tokens."


def test_a_named_code_and_param_tell_the_caller_what_was_wrong() -> None:
    said = {"message": "max_tokens is too large: 5000", "type": "invalid_request_error"}
    body = orjson.dumps({"error": {**said, "param": "max_tokens", "code": "invalid_value"}})
    sent = orjson.dumps({"model": "m", "max_tokens": 5000})
    error = rendered(UpstreamStatus("gpu-1", 400, body, {}, sent))["error"]
    assert error == {
        "message": "gpu-1 answered 400 (invalid_value)",
        "type": "invalid_request_error",
        "param": "max_tokens",
        "code": "invalid_value",
    }


def test_a_429_keeps_retry_after_and_none_of_the_providers_words() -> None:
    body = orjson.dumps(
        {"error": {"message": LEAKY, "type": "tokens", "code": "rate_limit_exceeded"}}
    )
    error = UpstreamStatus("mini", 429, body, {"Retry-After": "4"})
    assert (error.status, error.retryable, error.headers) == (429, True, {"Retry-After": "4"})
    shown = error.render().decode()
    for secret in ("org-Abc123XyZ", "sk-proj", "platform.example", "Rate limit reached"):
        assert secret not in shown
    assert rendered(error)["error"]["code"] == "rate_limit_exceeded"
    assert error.detail == LEAKY  # for the operator's log


@pytest.mark.parametrize(
    "field",
    ["sk-test-cloud-key-5678", "org-Abc123XyZ", "proj_Ab3dE5gH7jK9", "see the docs", "x" * 65, 7.5],
)
def test_a_field_that_is_no_short_identifier_is_not_shown(field: object) -> None:
    body = orjson.dumps({"error": {"message": "no", "type": field, "param": field, "code": field}})
    error = rendered(UpstreamStatus("gpu-1", 400, body, {}))["error"]
    assert error == {
        "message": "gpu-1 answered 400",
        "type": "upstream_error",
        "param": None,
        "code": "upstream_error",
    }


@pytest.mark.parametrize("status", [500, 502, 504, 507])
def test_engine_failure_is_a_gateway_502_naming_the_backend(status: int) -> None:
    body = orjson.dumps(
        {"error": {"message": "CUDA out of memory", "type": "InternalError", "code": "oom"}}
    )
    error = UpstreamStatus("gpu-1", status, body, {})
    assert error.status == 502
    assert error.upstream_status == status
    assert error.retryable is True
    assert rendered(error)["error"] == {  # a 5xx's internals are the gateway's to know
        "message": f"gpu-1 answered {status}",
        "type": "upstream_error",
        "param": None,
        "code": "upstream_error",
    }
    assert error.detail == "CUDA out of memory"


def test_engine_503_stays_503_as_upstream_overloaded() -> None:
    body = orjson.dumps({"error": {"message": "server is overloaded"}})
    error = UpstreamStatus("gpu-2", 503, body, {"Retry-After": "2"})
    assert (error.status, error.code, error.retryable) == (503, "upstream_overloaded", True)
    assert rendered(error)["error"]["message"] == "gpu-2 answered 503"
    assert error.headers == {"Retry-After": "2"}


def test_engine_503_code_does_not_leak_into_later_errors() -> None:
    assert UpstreamStatus("gpu-2", 503, None, {}).code == "upstream_overloaded"
    assert UpstreamStatus("gpu-2", 500, None, {}).code == "upstream_error"


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b"<html>Internal Server Error</html>", "<html>Internal Server Error</html>"),
        (b'{"error": "model not loaded"}', "model not loaded"),  # Ollama's
        (b'{"object": "error", "message": "bad", "code": 400}', "bad"),  # vLLM's older shape
        (b'{"detail": "not found"}', '{"detail": "not found"}'),
        (b'{"error": {"type": "x"}}', '{"error": {"type": "x"}}'),  # fields, but no words
        (b"x" * 3000, "x" * 2000),  # kept for the log, which cuts it shorter once masked
        (b"line one\nline two\x1b[31m", "line one line two [31m"),  # one printable line
        (b"", ""),
    ],
)
def test_what_the_upstream_said_is_kept_for_the_log_only(body: bytes, detail: str) -> None:
    error = UpstreamStatus("mac", 404, body, {})
    assert error.detail == detail
    assert rendered(error)["error"]["message"] == "mac answered 404"


@pytest.mark.parametrize(
    ("error", "retryable"),
    [
        (UpstreamError("x"), False),
        (UpstreamUnavailable("x"), True),
        (UpstreamTimeout("x"), False),
        (UpstreamDropped("x"), False),
        (UpstreamStatus("b", 400, None, {}), False),
        (UpstreamStatus("b", 422, None, {}), False),
        (UpstreamStatus("b", 429, None, {}), True),
        (UpstreamStatus("b", 500, None, {}), True),
        (UpstreamStatus("b", 503, None, {}), True),
    ],
)
def test_retryable_flags(error: UpstreamError, retryable: bool) -> None:
    assert error.retryable is retryable
