"""A provider's error status, as litellm raises it, becomes OpenAI's error object with the
provider's own message, type and code (litellm wraps them in its own text)."""

from __future__ import annotations

import orjson
import pytest

from proxy.errors import UpstreamStatus
from proxy.legs.cloud_errors import mapped

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
def test_the_providers_message_and_type_reach_the_client(message: str) -> None:
    error = error_of(raised(message))
    assert error["message"] == "temperature: must be a number between 0 and 1"
    assert error["type"] == "invalid_request_error"


def test_an_openai_style_code_and_param_are_kept() -> None:
    inner = {"message": "bad value", "type": "invalid_request_error", "param": "n", "code": "x1"}
    error = error_of(raised("OpenAIException - " + orjson.dumps({"error": inner}).decode()))
    assert error == inner


def test_text_without_the_providers_json_is_kept_as_it_is() -> None:
    error = error_of(raised("OpenAIException - upstream said no { not json", 429))
    assert str(error["message"]).startswith("litellm.BadRequestError: OpenAIException")
    assert error["type"] == "upstream_error"
    assert error["code"] == "429"
