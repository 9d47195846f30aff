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


def test_engine_client_error_body_passes_through_unchanged() -> None:
    error = UpstreamStatus("gpu-1", 400, ENGINE_400, {})
    assert error.status == 400
    assert error.render() == ENGINE_400
    assert error.retryable is False


def test_engine_client_error_message_names_backend_and_engine_message() -> None:
    error = UpstreamStatus("gpu-1", 400, ENGINE_400, {})
    assert (
        error.message == "gpu-1 answered 400: This model's maximum context length is 4096 tokens."
    )


def test_engine_404_passes_through() -> None:
    body = orjson.dumps({"error": {"message": "model 'x' not found", "type": "NotFoundError"}})
    error = UpstreamStatus("mac", 404, body, {})
    assert (error.status, error.render(), error.retryable) == (404, body, False)


def test_engine_429_passes_through_is_retryable_and_keeps_retry_after() -> None:
    body = orjson.dumps({"error": {"message": "queue full"}})
    error = UpstreamStatus("gpu-1", 429, body, {"Retry-After": "4"})
    assert (error.status, error.render(), error.retryable) == (429, body, True)
    assert error.headers == {"Retry-After": "4"}


@pytest.mark.parametrize("status", [500, 502, 504, 507])
def test_engine_failure_is_a_gateway_502_naming_the_backend(status: int) -> None:
    body = orjson.dumps({"error": {"message": "CUDA out of memory", "type": "InternalError"}})
    error = UpstreamStatus("gpu-1", status, body, {})
    assert error.status == 502
    assert error.upstream_status == status
    assert error.retryable is True
    assert rendered(error)["error"] == {
        "message": f"gpu-1 answered {status}: CUDA out of memory",
        "type": "upstream_error",
        "param": None,
        "code": "upstream_error",
    }


def test_engine_503_stays_503_as_upstream_overloaded() -> None:
    body = orjson.dumps({"error": {"message": "server is overloaded"}})
    error = UpstreamStatus("gpu-2", 503, body, {"Retry-After": "2"})
    assert (error.status, error.code, error.retryable) == (503, "upstream_overloaded", True)
    assert rendered(error)["error"]["message"] == "gpu-2 answered 503: server is overloaded"
    assert error.headers == {"Retry-After": "2"}


def test_engine_503_code_does_not_leak_into_later_errors() -> None:
    assert UpstreamStatus("gpu-2", 503, None, {}).code == "upstream_overloaded"
    assert UpstreamStatus("gpu-2", 500, None, {}).code == "upstream_error"


def test_non_json_engine_body_is_quoted_in_the_message() -> None:
    error = UpstreamStatus("gpu-1", 500, b"<html>Internal Server Error</html>", {})
    assert error.message == "gpu-1 answered 500: <html>Internal Server Error</html>"


def test_long_non_json_engine_body_is_cut_to_its_start() -> None:
    error = UpstreamStatus("gpu-1", 502, b"x" * 1000, {})
    assert error.message == "gpu-1 answered 502: " + "x" * 200


def test_ollama_style_error_string_is_used_as_the_message() -> None:
    error = UpstreamStatus("mac", 500, b'{"error": "model not loaded"}', {})
    assert error.message == "mac answered 500: model not loaded"


@pytest.mark.parametrize("body", [b'{"detail": "not found"}', b"[1]", b"null"])
def test_json_engine_body_without_an_openai_message_is_quoted(body: bytes) -> None:
    error = UpstreamStatus("mac", 500, body, {})
    assert error.message == f"mac answered 500: {body.decode()}"


def test_empty_engine_body_renders_our_own_error() -> None:
    error = UpstreamStatus("gpu-1", 400, b"", {})
    assert error.status == 400
    assert rendered(error)["error"]["message"] == "gpu-1 answered 400: "


def test_non_json_engine_client_error_still_renders_an_openai_error() -> None:
    error = UpstreamStatus("gpu-1", 404, b"404 page not found", {})
    assert rendered(error)["error"]["message"] == "gpu-1 answered 404: 404 page not found"


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
