"""The cloud leg: the only module that imports litellm, and only when a cloud target is used.

Every provider litellm knows works by its model string (`openai/gpt-4o-mini`,
`anthropic/...`, `azure/...`); keys come from the environment variables the policy names. The
client still sees OpenAI's wire format: litellm's responses are rendered as OpenAI JSON, and
streams as SSE chunk by chunk. litellm's own retries are off: the pipeline retries, with its
breakers and its privacy rules in the loop. `import litellm` costs seconds and ~140 MB, and would
fetch a price list at start without LITELLM_LOCAL_MODEL_COST_MAP, which is set here.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from policies.model import CloudTarget
from proxy.errors import (
    APIError,
    UpstreamError,
    UpstreamStatus,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from proxy.schema import ProxyRequest

_DROPPED = ("model", "stream", "metadata")


def _litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


@dataclass
class CloudAnswer:
    target: str
    stream: bool
    body: bytes = b""
    source: Any = None  # litellm's stream
    cost: float = 0.0
    usage: dict[str, Any] = field(default_factory=dict)
    on_usage: Any = None  # called with a stream's final usage, to price it
    show_usage: bool = True  # False: the client did not ask for the usage chunk

    @property
    def status(self) -> int:
        return 200

    def headers(self) -> list[tuple[bytes, bytes]]:
        kind = b"text/event-stream" if self.stream else b"application/json"
        return [(b"content-type", kind)]

    async def read(self) -> bytes:
        return self.body

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self.source:
                usage = getattr(chunk, "usage", None)
                if usage is not None and self.on_usage is not None:
                    self.on_usage(usage)
                if usage is not None and not self.show_usage:
                    if not getattr(chunk, "choices", None):
                        continue  # the usage chunk the client did not ask for
                    chunk = chunk.model_copy(update={"usage": None})
                yield b"data: " + chunk.model_dump_json(exclude_none=True).encode() + b"\n\n"
            yield b"data: [DONE]\n\n"
        except Exception as exc:
            raise _mapped(self.target, exc) from exc
        finally:
            self.close()

    def close(self) -> None:
        closer = getattr(self.source, "aclose", None)
        if closer is not None and self.stream:
            self.source = None


class Cloud:
    def __init__(self) -> None:
        self._module: Any = None
        self.spent = 0.0  # USD by litellm's price tables, for /metrics

    @property
    def litellm(self) -> Any:
        if self._module is None:
            self._module = _litellm()
        return self._module

    async def open(
        self,
        target: CloudTarget,
        request: ProxyRequest,
        request_id: str,
        charge: Callable[[float], None] = lambda usd: None,
    ) -> CloudAnswer:
        """`charge` is called with the answer's cost once known (a stream's at its end)."""
        params = {k: v for k, v in request.body.items() if k not in _DROPPED}
        params.update(model=target.model, stream=request.stream, num_retries=0, max_retries=0,
                      drop_params=True, extra_headers={"X-Request-ID": request_id})  # fmt: skip
        asked = _asks_usage(request.body)
        if request.stream:  # always priced: the usage chunk is asked for, and hidden if unasked
            options = request.body.get("stream_options")
            params["stream_options"] = {**(options if isinstance(options, dict) else {}),
                                        "include_usage": True}  # fmt: skip
        if target.api_base:
            params["api_base"] = target.api_base
        if target.api_key_env:
            params["api_key"] = os.environ.get(target.api_key_env, "")
        call = {
            "chat": "acompletion",
            "completions": "atext_completion",
            "embeddings": "aembedding",
        }
        try:
            result = await getattr(self.litellm, call[request.endpoint])(**params)
        except Exception as exc:
            raise _mapped(target.name, exc) from exc
        if request.stream:

            def price(usage: Any) -> None:
                charge(self._price_stream(target, usage))

            return CloudAnswer(target.name, True, source=result, on_usage=price,
                               show_usage=asked)  # fmt: skip
        payload = result.model_dump(exclude_none=True)
        cost = self._cost(result)
        self.spent += cost
        charge(cost)
        return CloudAnswer(target.name, False, orjson.dumps(payload), cost=cost,
                           usage=payload.get("usage") or {})  # fmt: skip

    def _price_stream(self, target: CloudTarget, usage: Any) -> float:
        """A stream is priced from its final usage chunk (always asked for upstream); a
        provider that sends none leaves its cost unknown (0)."""
        try:
            prompt, completion = self.litellm.cost_per_token(
                model=target.model,
                prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
                completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            )
        except Exception:  # an unpriced model: unknown cost, never a failed request
            return 0.0
        cost = float(prompt) + float(completion)
        self.spent += cost
        return cost

    def _cost(self, result: Any) -> float:
        try:
            return float(self.litellm.completion_cost(completion_response=result))
        except Exception:  # an unpriced model costs what we cannot know: 0, not a failed request
            return 0.0


def _asks_usage(body: dict[str, Any]) -> bool:
    options = body.get("stream_options")
    return isinstance(options, dict) and bool(options.get("include_usage"))


def _mapped(target: str, exc: Exception) -> APIError:
    """litellm's exceptions -> the proxy's, at this boundary."""
    if isinstance(exc, APIError):
        return exc
    name = type(exc).__name__
    status = getattr(exc, "status_code", None)
    if "Timeout" in name:
        return UpstreamTimeout(f"{target}: {name}")
    if "APIConnectionError" in name or status is None:
        return UpstreamUnavailable(f"{target}: {name}: {str(exc)[:200]}")
    headers = {}
    response = getattr(exc, "response", None)
    retry_after = (
        getattr(response, "headers", {}).get("retry-after") if response is not None else None
    )
    if retry_after:
        headers["Retry-After"] = str(retry_after)
    message = str(getattr(exc, "message", exc))[:300]
    body = orjson.dumps(
        {
            "error": {
                "message": message,
                "type": "upstream_error",
                "param": None,
                "code": str(status),
            }
        }
    )
    error: UpstreamError = UpstreamStatus(target, int(status), body, headers)
    return error
