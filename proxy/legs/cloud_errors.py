"""litellm's exceptions -> the proxy's, at the cloud leg's boundary: what failed on the wire
(a provider's status, a timeout, a lost connection) and what litellm refused before sending
anything (the caller's 400: it says nothing about the target, so no breaker counts it)."""

from __future__ import annotations

import orjson

from proxy.errors import (
    APIError,
    BadRequest,
    UpstreamError,
    UpstreamStatus,
    UpstreamTimeout,
    UpstreamUnavailable,
)


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and every one it wraps (litellm wraps what really happened)."""
    chain = [exc]
    while (inner := chain[-1].__cause__ or chain[-1].__context__) is not None:
        if inner in chain:
            break
        chain.append(inner)
    return chain


# Where an exception from talking to a provider comes from; anything else litellm raises was
# raised while it built the call from the request, before anything was sent.
_WIRE_MODULES = frozenset({"openai", "httpx", "httpcore", "aiohttp", "anthropic", "h11", "ssl"})


def _from_the_wire(exc: BaseException) -> bool:
    return isinstance(exc, OSError | TimeoutError) or (
        type(exc).__module__.split(".")[0] in _WIRE_MODULES
    )


def mapped(target: str, exc: Exception) -> APIError:
    """litellm's exceptions -> the proxy's, at this boundary. A failure that never touched the
    wire (litellm could not build the call from the request) is the caller's 400: it says
    nothing about the target, so no breaker may count it."""
    if isinstance(exc, APIError):
        return exc
    chain = _chain(exc)
    if not any(_from_the_wire(e) for e in chain):
        cause = chain[-1]
        first_line = (str(cause).splitlines() or [""])[0][:200]
        return BadRequest(
            f"cloud target {target!r} cannot take this request: "
            f"{type(cause).__name__}: {first_line}",
            code="cloud_rejected_request",
        )
    name = type(exc).__name__
    status = getattr(exc, "status_code", None)
    if "Timeout" in name:
        return UpstreamTimeout(f"{target}: {name}")
    if "APIConnectionError" in name or status is None:
        return UpstreamUnavailable(f"{target}: {name}: {str(exc)[:200]}")
    return _status_error(target, exc, int(status))


def _status_error(target: str, exc: Exception, status: int) -> UpstreamError:
    """A provider's error status, in OpenAI's error shape, with its Retry-After."""
    headers = {}
    response = getattr(exc, "response", None)
    retry_after = (
        getattr(response, "headers", {}).get("retry-after") if response is not None else None
    )
    if retry_after:
        headers["Retry-After"] = str(retry_after)
    error = _provider_error(str(getattr(exc, "message", exc)), status)
    return UpstreamStatus(target, status, orjson.dumps({"error": error}), headers)


def _provider_error(text: str, status: int) -> dict[str, object]:
    """OpenAI's error object from litellm's message, which wraps the provider's own error
    (`litellm.BadRequestError: AnthropicException - {"type": "error", "error": {...}}`): the
    provider's message, type and code when its JSON is there, else litellm's text, cut short."""
    error: dict[str, object] = {
        "message": text[:300],
        "type": "upstream_error",
        "param": None,
        "code": str(status),
    }
    start, end = text.find("{"), text.rfind("}")  # a stream's error quotes it as bytes: b'{...}'
    try:
        document = orjson.loads(text[start : end + 1]) if 0 <= start < end else None
    except orjson.JSONDecodeError:
        return error
    inner = document.get("error") if isinstance(document, dict) else None
    if not isinstance(inner, dict) or not isinstance(inner.get("message"), str):
        return error
    error["message"] = inner["message"][:1000]
    if isinstance(inner.get("type"), str):
        error["type"] = inner["type"]
    if isinstance(inner.get("param"), str):
        error["param"] = inner["param"]
    code = inner.get("code")
    error["code"] = code if isinstance(code, str) else error["code"]
    return error
