"""The error tree shared by the proxy and the simulator, and the one OpenAI error renderer.

Every error a client can see is an `APIError`: it knows its HTTP status and renders itself in
OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`, so no handler ever builds an
error body by hand and no traceback ever reaches a client.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
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
        said = _said(body)
        code = _known(said.get("code"), KNOWN_CODES) if status < 500 else None
        shown = f" ({code})" if code and not code.isdigit() else ""
        super().__init__(
            f"{backend} answered {status}{shown}",
            detail=str(said.get("message", "")),
            param=_param_sent(said.get("param"), sent) if status < 500 else None,
            code=code,
            headers=_retry_after(status, headers),
        )
        self.upstream_status = status
        self.status = status if status < 500 or status == 503 else 502
        self.retryable = status >= 500 or status == 429
        if status == 503:
            self.code = "upstream_overloaded"
        if status < 500 and (kind := _known(said.get("type"), KNOWN_TYPES)):
            self.type = kind

    @property
    def summary(self) -> str:
        return f"answered {self.upstream_status}"


# What is kept of an upstream's words: enough to mask a key in before the log cuts it shorter.
DETAIL_KEPT = 2000


def loggable(text: str, limit: int = 500) -> str:
    """An upstream's text as the log may show it: one line of printable characters, cut short."""
    text = text[:limit]
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else " " for c in text)


# The error codes and types an upstream's 4xx may show its caller: OpenAI's (its error codes
# guide, its SDK's status errors, its rate-limit types), Anthropic's error types, vLLM's (the
# exception's class name as the type, the status as the code), Ollama's OpenAI-compatible
# types. A word outside them (an organisation, a host, a key) goes to the log only.
KNOWN_TYPES = frozenset(
    {
        "invalid_request_error",
        "authentication_error",
        "permission_error",
        "not_found_error",
        "conflict_error",
        "unprocessable_entity_error",
        "rate_limit_error",
        "request_too_large",
        "billing_error",
        "insufficient_quota",
        "api_error",
        "server_error",
        "overloaded_error",
        "timeout_error",
        "tokens",
        "requests",
        "tokens_usage_based",
        "requests_usage_based",
        "BadRequestError",
        "AuthenticationError",
        "PermissionDeniedError",
        "NotFoundError",
        "ConflictError",
        "UnprocessableEntityError",
        "RateLimitError",
        "InternalServerError",
        "NotImplementedError",
        "ValidationError",
    }
)
KNOWN_CODES = frozenset(
    {
        "invalid_api_key",
        "invalid_authentication",
        "invalid_organization",
        "account_deactivated",
        "permission_denied",
        "insufficient_permissions",
        "unsupported_country_region_territory",
        "model_not_found",
        "model_not_available",
        "not_found",
        "context_length_exceeded",
        "string_above_max_length",
        "array_above_max_length",
        "array_below_min_length",
        "integer_above_max_value",
        "integer_below_min_value",
        "decimal_above_max_value",
        "decimal_below_min_value",
        "invalid_value",
        "invalid_type",
        "invalid_prompt",
        "invalid_image",
        "invalid_image_url",
        "invalid_image_format",
        "image_parse_error",
        "invalid_function_parameters",
        "missing_required_parameter",
        "unknown_parameter",
        "unsupported_parameter",
        "unsupported_value",
        "content_filter",
        "content_policy_violation",
        "json_validate_failed",
        "tool_use_failed",
        "request_too_large",
        "rate_limit_exceeded",
        "tokens_exceeded",
        "requests_exceeded",
        "insufficient_quota",
        "billing_hard_limit_reached",
        "billing_not_active",
        "server_error",
        "engine_overloaded",
        "overloaded",
        "timeout",
    }
)


def _known(value: object, vocabulary: frozenset[str]) -> str | None:
    """`value` when the vocabulary has it, or an engine's int code that is an HTTP status
    (vLLM's), as its digits; else None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value) if 400 <= value <= 599 else None
    if isinstance(value, str) and value in vocabulary:
        return value
    return None


# A parameter's path: keys and indices (`messages[0].content`, `messages.0.content`)
_PATH_STEP = re.compile(r"\.?([A-Za-z_][A-Za-z0-9_]*)|\[(\d{1,4})\]|\.(\d{1,4})")


def _param_sent(value: object, sent: bytes | None) -> str | None:
    """`value` when it names a field of the body the request sent (a top-level key, or a path
    that exists in it): the caller's own words, never the upstream's."""
    if not isinstance(value, str) or not value or len(value) > 200 or not sent:
        return None
    steps: list[str | int] = []
    at = 0
    while at < len(value):
        step = _PATH_STEP.match(value, at)
        if step is None or (at == 0 and (value[0] == "." or not step.group(1))):
            return None
        key, index, dotted = step.groups()
        steps.append(key if key is not None else int(index or dotted))
        at = step.end()
    try:
        node: object = orjson.loads(sent)
    except orjson.JSONDecodeError:
        return None
    for part in steps:
        in_dict = isinstance(node, dict) and isinstance(part, str) and part in node
        in_list = isinstance(node, list) and isinstance(part, int) and part < len(node)
        if not (in_dict or in_list):
            return None
        node = node[part]  # type: ignore[index]
    return value


# The longest wait an upstream's Retry-After may ask of a client, in seconds
RETRY_AFTER_MOST_S = 86_400


def _retry_after(status: int, headers: Mapping[str, str]) -> dict[str, str]:
    """The proxy's own `Retry-After` for an upstream's 429 or 503 (the statuses HTTP gives it a
    meaning for): its delta-seconds, or its HTTP date as seconds from now, at most a day; a
    value that is neither, and any other header, is dropped."""
    if status not in (429, 503):
        return {}
    raw = next((v for k, v in headers.items() if k.lower() == "retry-after"), None)
    seconds = retry_after_seconds(raw)
    return {} if seconds is None else {"Retry-After": f"{seconds:g}"}


# delta-seconds, and the fractions some providers send
_SECONDS = re.compile(r"\d{1,10}(?:\.\d{1,3})?")


def retry_after_seconds(raw: object, now: float | None = None) -> float | None:
    """A Retry-After value as seconds (0 to a day), or None if it is not one."""
    if not isinstance(raw, str) or len(raw) > 64:
        return None
    text = raw.strip()
    if _SECONDS.fullmatch(text):
        return min(float(text), RETRY_AFTER_MOST_S)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # an HTTP date is GMT; a date without a zone is no HTTP date
        return None
    wait = when.timestamp() - (time.time() if now is None else now)
    return min(max(0, math.ceil(wait)), RETRY_AFTER_MOST_S)


def _said(body: bytes | None) -> dict[str, object]:
    """An upstream's error as fields: OpenAI's `{"error": {...}}`, vLLM's fields at the top,
    Ollama's `{"error": "text"}`; anything else is text (its start). The message is what the
    log will show: the body's start where the fields name none."""
    try:
        parsed = orjson.loads(body or b"")
    except orjson.JSONDecodeError:
        parsed = None
    inner = parsed.get("error") if isinstance(parsed, dict) else None
    said: dict[str, object] = {}
    if isinstance(inner, dict):
        said = inner
    elif isinstance(inner, str):
        said = {"message": inner}
    elif isinstance(parsed, dict):
        said = parsed
    if said.get("message"):
        return said
    return {**said, "message": (body or b"")[:DETAIL_KEPT].decode(errors="replace")}
