"""The error tree shared by the proxy and the simulator, and the one OpenAI error renderer.

Every error a client can see is an `APIError`: it knows its HTTP status and renders itself in
OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`, so no handler ever builds an
error body by hand and no traceback ever reaches a client.
"""

from __future__ import annotations

from typing import Any

import orjson


class APIError(Exception):
    """An error with an HTTP status and an OpenAI-shaped body."""

    status = 500
    type = "server_error"
    code: str | None = None

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.type, self.param, self.code)

    def render(self) -> bytes:
        return orjson.dumps(self.body())


class BadRequest(APIError):
    status = 400
    type = "invalid_request_error"


class Unauthorized(APIError):
    status = 401
    type = "authentication_error"
    code = "invalid_api_key"


class NotFound(APIError):
    status = 404
    type = "invalid_request_error"
    code = "not_found"


class ModelNotFound(NotFound):
    code = "model_not_found"


class PayloadTooLarge(APIError):
    status = 413
    type = "invalid_request_error"
    code = "request_too_large"


class RateLimited(APIError):
    """429; `retry_after` seconds becomes the `Retry-After` header."""

    status = 429
    type = "rate_limit_error"
    code = "rate_limit_exceeded"

    def __init__(self, message: str, *, retry_after: float, code: str | None = None) -> None:
        seconds = max(1, round(retry_after + 0.499))
        super().__init__(message, code=code, headers={"Retry-After": str(seconds)})
        self.retry_after = retry_after


class InternalError(APIError):
    status = 500
    type = "server_error"
    code = "internal_error"


class Overloaded(APIError):
    status = 503
    type = "server_error"
    code = "overloaded"


def error_body(
    message: str, type_: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """OpenAI's error object."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}
