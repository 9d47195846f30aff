"""What of an upstream's error may reach a client, and how its words reach the log (pure).

Providers and gateways put organisation and project IDs, masked or whole keys and internal URLs
in their errors, and in any header they send. So of an upstream's 4xx only the fields that tell
the caller what was wrong pass: `code` and `type` when the APIs' own vocabulary has them,
`param` when it names a field of the body the caller sent; a `Retry-After` is read as a number
and written anew; everything else goes to the log, one printable line, cut short.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime

import orjson

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


def known(value: object, vocabulary: frozenset[str]) -> str | None:
    """`value` when the vocabulary has it, or an engine's int code that is an HTTP status
    (vLLM's), as its digits; else None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value) if 400 <= value <= 599 else None
    if isinstance(value, str) and value in vocabulary:
        return value
    return None


# A parameter's path: keys and indices (`messages[0].content`, `messages.0.content`)
_PATH_STEP = re.compile(r"\.?([A-Za-z_][A-Za-z0-9_]*)|\[(\d{1,4})\]|\.(\d{1,4})")


def param_sent(value: object, sent: bytes | None) -> str | None:
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


def retry_after(status: int, headers: Mapping[str, str]) -> dict[str, str]:
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


def said(body: bytes | None) -> dict[str, object]:
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
