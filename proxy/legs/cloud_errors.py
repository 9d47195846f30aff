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
from proxy.legs.upstream import logged


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


def reported(target: str, exc: Exception, request_id: str, secret: str = "") -> APIError:
    """mapped(), and what the provider said written to the log (the client sees none of it)."""
    error = mapped(target, exc)
    if isinstance(error, UpstreamError):
        logged(error, request_id, secret)
    return error


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
        return UpstreamTimeout(f"{target}: {name}", detail=str(exc))
    if "APIConnectionError" in name or status is None:
        return UpstreamUnavailable(f"{target}: {name}", detail=str(exc))
    return _status_error(target, exc, int(status))


def _status_error(target: str, exc: Exception, status: int) -> UpstreamError:
    """A provider's error status, with its Retry-After; what the provider said is read from
    litellm's text (UpstreamStatus keeps of it, and of the Retry-After, what a client may see:
    no `param`, which would name a field of the provider's format, not of the caller's body)."""
    headers = {}
    response = getattr(exc, "response", None)
    retry_after = (
        getattr(response, "headers", {}).get("retry-after") if response is not None else None
    )
    if retry_after:
        headers["Retry-After"] = str(retry_after)
    said = _providers_error(str(getattr(exc, "message", exc)))
    return UpstreamStatus(target, status, said, headers)


def _providers_error(text: str) -> bytes:
    """The provider's own error document inside litellm's message, which wraps it
    (`litellm.BadRequestError: AnthropicException - {"type": "error", "error": {...}}`; a
    stream's error quotes it as bytes: b'{...}'), else litellm's text as it is."""
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        document = text[start : end + 1]
        try:
            orjson.loads(document)
        except orjson.JSONDecodeError:
            pass
        else:
            return document.encode()
    return text.encode()
