"""The error tree shared by the proxy and the simulator, and the one OpenAI error renderer.

Every error a client can see is an `APIError`: it knows its HTTP status and renders itself in
OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`, so no handler ever builds an
error body by hand and no traceback ever reaches a client.
"""

from __future__ import annotations

import math
from typing import Any

import orjson

from proxy.upstream_said import (
    DETAIL_KEPT,
    KNOWN_CODES,
    KNOWN_TYPES,
    known,
    loggable,
    param_sent,
    retry_after,
    said,
)


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


class Forbidden(APIError):
    status = 403
    type = "permission_error"
    code = "permission_denied"


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


class RequestTimeout(APIError):
    status = 408
    type = "invalid_request_error"
    code = "request_timeout"


class ClientGone(APIError):
    """The client left before its request was read: nobody reads the answer (499, as nginx
    logs it), but the record says what happened."""

    status = 499
    type = "invalid_request_error"
    code = "client_disconnected"


class RateLimited(APIError):
    """429; `retry_after` seconds becomes the `Retry-After` header."""

    status = 429
    type = "rate_limit_error"
    code = "rate_limit_exceeded"

    def __init__(
        self, message: str, *, retry_after: float, code: str | None = None, limit: str = ""
    ) -> None:
        seconds = max(1, math.ceil(retry_after - 1e-9))
        headers = {"Retry-After": str(seconds)}
        if limit:  # which of the tenant's limits: the message says it too, in words
            headers["X-Overspill-Limit"] = limit
        super().__init__(message, code=code, headers=headers)
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


class NoBackend(APIError):
    """No target can take the request; the message says why, backend by backend."""

    status = 503
    type = "server_error"
    code = "no_backend_available"


class UpstreamError(APIError):
    """Something went wrong talking to an engine; `retryable` if nothing reached the client.

    Its message is the proxy's own (the target's name, what failed, a status); `detail` is what
    the upstream itself said (an error's text, an OS error, an address): the operator's log has
    it, a client never does (it may hold the operator's organisation, key or internals)."""

    status = 502
    type = "upstream_error"
    code = "upstream_error"
    retryable = False

    def __init__(
        self,
        message: str,
        *,
        detail: str = "",
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message, param=param, code=code, headers=headers)
        self.detail = loggable(detail, DETAIL_KEPT)

    @property
    def summary(self) -> str:
        """What went wrong, with no text the upstream or the request supplied: the breaker keeps
        it and shows it to every caller while it is open, so it must not carry one request's
        content to another."""
        return f"{self.code} ({self.status})"


class UpstreamUnavailable(UpstreamError):
    """The engine could not be reached (connection refused, reset, DNS): safe to try elsewhere."""

    code = "upstream_unavailable"
    retryable = True


class UpstreamNotConnected(UpstreamUnavailable):
    """No connection was made (refused, unreachable, the connect timeout): nothing was sent.
    The engine is down or its backlog is full, so the next target goes before this one again."""


class UpstreamTimeout(UpstreamError):
    status = 504
    code = "upstream_timeout"


class UpstreamDropped(UpstreamError):
    """The engine closed the connection in the middle of its answer."""

    code = "upstream_dropped"


class UpstreamUnreadable(UpstreamError):
    """The target answered, but not in a form the proxy may relay: compressed although identity
    was asked for, or a whole answer that is not a JSON object. Never relayed, never stored; not
    tried again (the target did the work, and a cloud bills it), and its breaker counts it."""

    code = "upstream_unreadable"


class UpstreamStatus(UpstreamError):
    """The engine answered with an error status.

    The status is kept: a client error (4xx: bad request, unknown model, context too long, 429)
    stays what it is, an engine's internal failure is the gateway's 502, its 503 stays a 503
    (retry later). The message is the proxy's, naming the backend; of a 4xx's own error only
    `type`, `param` and `code` pass, and only when they are short identifiers (they tell the
    caller what was wrong): `code` and `type` when the APIs' vocabulary has them, `param` when
    it names a field of the body `sent`; the rest goes to the log (`detail`), as does every
    upstream header but a `Retry-After` of a 429 or a 503, which the proxy writes anew.
    """

    def __init__(
        self,
        backend: str,
        status: int,
        body: bytes | None,
        headers: dict[str, str],
        sent: bytes | None = None,
    ):
        words = said(body)
        code = known(words.get("code"), KNOWN_CODES) if status < 500 else None
        shown = f" ({code})" if code and not code.isdigit() else ""
        super().__init__(
            f"{backend} answered {status}{shown}",
            detail=str(words.get("message", "")),
            param=param_sent(words.get("param"), sent) if status < 500 else None,
            code=code,
            headers=retry_after(status, headers),
        )
        self.upstream_status = status
        self.status = status if status < 500 or status == 503 else 502
        self.retryable = status >= 500 or status == 429
        if status == 503:
            self.code = "upstream_overloaded"
        if status < 500 and (kind := known(words.get("type"), KNOWN_TYPES)):
            self.type = kind

    @property
    def summary(self) -> str:
        return f"answered {self.upstream_status}"
