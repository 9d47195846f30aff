"""A provider's error status, as litellm raises it, becomes OpenAI's error object: the status
and the provider's type, param and code when they are short identifiers (litellm wraps them in
its own text), the proxy's own words naming the target; the provider's words go to the log."""

from __future__ import annotations

import logging

import orjson
import pytest

from proxy.errors import UpstreamStatus, UpstreamUnavailable
from proxy.legs.cloud_errors import mapped, reported

ANTHROPIC = (
    'AnthropicException - {"type":"error","error":{"type":"invalid_request_error",'
    '"message":"temperature: must be a number between 0 and 1"}}'
)


class BadRequestError(Exception):
    """Shaped as litellm's: a status, a message, raised from the provider's HTTP error."""

    __module__ = "litellm.exceptions"

    def __init__(self, message: str, status_code: int = 400) -> None:
        super().__init__(message)
        self.message = f"litellm.BadRequestError: {message}"
        self.status_code = status_code


class ProviderHTTPError(Exception):
    __module__ = "httpx"


def raised(message: str, status: int = 400) -> Exception:
    try:
        try:
            raise ProviderHTTPError("400 Bad Request")
        except ProviderHTTPError as wire:
            raise BadRequestError(message, status) from wire
    except BadRequestError as error:
        return error


def error_of(exc: Exception) -> dict[str, object]:
    mapped_error = mapped("claude", exc)
    assert isinstance(mapped_error, UpstreamStatus)
    error: dict[str, object] = orjson.loads(mapped_error.render())["error"]
    return error


@pytest.mark.parametrize(
    "message",
    [ANTHROPIC, f"AnthropicException - b'{ANTHROPIC.split(' - ', 1)[1]}'"],
    ids=["whole", "stream (bytes quoted)"],
)
def test_the_providers_type_reaches_the_client_and_its_words_the_log(message: str) -> None:
    exc = raised(message)
    error = error_of(exc)
    assert error["message"] == "claude answered 400"
    assert error["type"] == "invalid_request_error"
    detail = mapped("claude", exc)
    assert isinstance(detail, UpstreamStatus)
    assert detail.detail == "temperature: must be a number between 0 and 1"


def test_an_openai_style_code_is_kept_and_a_param_of_the_providers_format_is_not() -> None:
    inner = {
        "message": "bad value",
        "type": "invalid_request_error",
        "param": "n",
        "code": "invalid_value",
    }
    error = error_of(raised("OpenAIException - " + orjson.dumps({"error": inner}).decode()))
    # the param would name a field of the provider's format, not of the caller's body
    assert error == {**inner, "message": "claude answered 400 (invalid_value)", "param": None}


def test_text_without_the_providers_json_goes_to_the_log_only() -> None:
    exc = raised("OpenAIException - upstream said no { not json", 429)
    error = error_of(exc)
    assert error["message"] == "claude answered 429"
    assert error["type"] == "upstream_error"
    mapped_error = mapped("claude", exc)
    assert isinstance(mapped_error, UpstreamStatus)
    assert mapped_error.detail.startswith("litellm.BadRequestError: OpenAIException")


class APIConnectionError(Exception):
    __module__ = "openai"


def test_a_connection_error_names_the_target_and_not_the_providers_address() -> None:
    exc = APIConnectionError("Connection error: https://10.1.2.3:8443/v1 refused (key sk-123)")
    error = mapped("claude", exc)
    assert isinstance(error, UpstreamUnavailable)
    assert error.message == "claude: APIConnectionError"
    assert "10.1.2.3" in error.detail


def test_the_log_has_the_providers_words_with_the_key_masked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    key = "sk-operator-key-98765"
    exc = raised(f"OpenAIException - Incorrect API key provided: {key}", 401)
    with caplog.at_level(logging.INFO, "overspill.upstream"):
        error = reported("claude", exc, "req-1", key)
    assert key not in error.render().decode()
    assert "claude answered 401 (request req-1)" in caplog.text
    assert "Incorrect API key provided: …8765" in caplog.text
    assert key not in caplog.text
