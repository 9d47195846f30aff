"""The cloud leg: the only module that imports litellm, and only when a cloud target is used.

Every provider litellm knows works by its model string (`openai/gpt-4o-mini`,
`anthropic/...`, `azure/...`); keys come from the environment variables the policy names. The
client still sees OpenAI's wire format: litellm's responses are rendered as OpenAI JSON, and
streams as SSE chunk by chunk. litellm's own retries are off: the pipeline retries, with its
breakers and its privacy rules in the loop. `import litellm` costs seconds and ~140 MB, and would
fetch a price list at start without LITELLM_LOCAL_MODEL_COST_MAP, which is set here.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from policies.model import CloudTarget
from proxy.cloud_params import Unlisted, dropped_header, outbound
from proxy.errors import (
    APIError,
    BadRequest,
    UpstreamError,
    UpstreamStatus,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from proxy.schema import ProxyRequest


def _litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


@dataclass
class StreamBill:
    """What a cloud stream cost, settled exactly once however it ends: from the provider's usage
    when it came, else from what passed (a client that leaves early, a stream that breaks), so
    no way of ending a stream escapes its charge."""

    price: Callable[[int, int], float]  # prompt, completion tokens -> USD
    charge: Callable[[float], None]
    prompt_estimate: int
    usage: Any = None
    pieces: int = 0  # chunks that carried text
    chars: int = 0
    settled: bool = False

    def saw(self, chunk: Any) -> None:
        if getattr(chunk, "usage", None) is not None:
            self.usage = chunk.usage
            self.settle()  # now, before the client sees the stream end and asks again
        for choice in getattr(chunk, "choices", None) or ():
            delta = getattr(choice, "delta", None)
            text = getattr(delta, "content", None) or getattr(choice, "text", None)
            if text:
                self.pieces += 1
                self.chars += len(text)

    def settle(self) -> None:
        if self.settled:
            return
        self.settled = True
        if self.usage is not None:
            prompt = int(getattr(self.usage, "prompt_tokens", 0) or 0)
            completion = int(getattr(self.usage, "completion_tokens", 0) or 0)
        else:  # at least one token a piece, and about four characters a token
            prompt, completion = self.prompt_estimate, max(self.pieces, -(-self.chars // 4))
        self.charge(self.price(prompt, completion))


@dataclass
class CloudAnswer:
    target: str
    stream: bool
    body: bytes = b""
    source: Any = None  # litellm's stream
    cost: float = 0.0
    usage: dict[str, Any] = field(default_factory=dict)
    bill: StreamBill | None = None  # a stream's, settled when it ends
    show_usage: bool = True  # False: the client did not ask for the usage chunk
    dropped: tuple[str, ...] = ()  # body fields left behind (proxy/cloud_params.py)

    @property
    def status(self) -> int:
        return 200

    def headers(self) -> list[tuple[bytes, bytes]]:
        kind = b"text/event-stream" if self.stream else b"application/json"
        headers = [(b"content-type", kind)]
        if self.dropped:
            headers.append((b"x-overspill-dropped", dropped_header(self.dropped)))
        return headers

    async def read(self) -> bytes:
        return self.body

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self.source:
                if self.bill is not None:
                    self.bill.saw(chunk)
                usage = getattr(chunk, "usage", None)
                if usage is not None and not self.show_usage:
                    if not getattr(chunk, "choices", None):
                        continue  # the usage chunk the client did not ask for
                    chunk = chunk.model_copy(update={"usage": None})
                yield b"data: " + chunk.model_dump_json(exclude_none=True).encode() + b"\n\n"
            yield b"data: [DONE]\n\n"
        except Exception as exc:
            raise _mapped(self.target, exc) from exc
        finally:
            source = self.source
            self.close()
            await _closed(source)

    def close(self) -> None:
        if self.bill is not None:
            self.bill.settle()
        if self.stream:
            self.source = None


async def _closed(source: Any) -> None:
    """Close litellm's stream, and with it the connection: the provider stops generating (and
    billing) as soon as the client is gone, not at the end of the answer."""
    closer = getattr(source, "aclose", None)
    if closer is not None:
        with contextlib.suppress(Exception):
            await closer()


class Cloud:
    def __init__(self) -> None:
        self._module: Any = None
        self.spent = 0.0  # USD by litellm's price tables, for /metrics

    @property
    def litellm(self) -> Any:
        if self._module is None:
            self._module = _litellm()
        return self._module

    def _loaded(self, target: str) -> Any:
        """litellm, or the target unavailable: a policy reloaded with cloud targets on an install
        without the cloud extra (a start with them is refused, see proxy/extras.py)."""
        try:
            return self.litellm
        except ImportError as exc:
            raise UpstreamUnavailable(
                f"{target}: the cloud extra is not installed (pip install 'overspill[cloud]')"
            ) from exc

    async def open(
        self,
        target: CloudTarget,
        request: ProxyRequest,
        request_id: str,
        charge: Callable[[float], None] = lambda usd: None,
        unlisted: Unlisted = "drop",
    ) -> CloudAnswer:
        """`charge` is called once with the answer's cost (a stream's when it ends, however it
        ends). Only the body's allow-listed parameters reach litellm: where the call goes, with
        which key, at what price, comes from the policy alone."""
        sent = outbound(request.endpoint, request.body, unlisted)

        def bill(usd: float) -> None:
            self.spent += usd
            charge(usd)

        params = {**sent.params, **self._operator_params(target, request, request_id)}
        call = getattr(self._loaded(target.name), _CALLS[request.endpoint])
        try:
            result = await call(**params)
        except Exception as exc:
            raise _mapped(target.name, exc) from exc
        except asyncio.CancelledError:
            # The client left while the provider worked: it may generate the whole answer, and
            # bill it. Charged as the most it could have cost, so leaving never pays less.
            bill(self._price(target, request.prompt_estimate, self._most_tokens(target, request)))
            raise
        if request.stream:
            price = functools.partial(self._price, target)
            stream_bill = StreamBill(price, bill, request.prompt_estimate)
            shown = _asks_usage(request.body)
            return CloudAnswer(
                target.name,
                True,
                source=result,
                bill=stream_bill,
                show_usage=shown,
                dropped=sent.dropped,
            )
        payload = result.model_dump(exclude_none=True)
        cost = self._cost(result)
        bill(cost)
        return CloudAnswer(
            target.name,
            False,
            orjson.dumps(payload),
            cost=cost,
            usage=payload.get("usage") or {},
            dropped=sent.dropped,
        )

    @staticmethod
    def _operator_params(
        target: CloudTarget, request: ProxyRequest, request_id: str
    ) -> dict[str, Any]:
        """Everything about the call that is the operator's: set last, so nothing a body
        carried can stand in for it."""
        params: dict[str, Any] = {
            "model": target.model,
            "stream": request.stream,
            "num_retries": 0,
            "max_retries": 0,
            "drop_params": True,
            "extra_headers": {"X-Request-ID": request_id},
            "api_base": target.api_base or None,
            "api_key": os.environ.get(target.api_key_env, "") if target.api_key_env else None,
        }
        if request.stream:  # always priced: the usage chunk is asked for, and hidden if unasked;
            # nothing else a client put in stream_options travels
            params["stream_options"] = {"include_usage": True}
        return params

    def _most_tokens(self, target: CloudTarget, request: ProxyRequest) -> int:
        """The most answer tokens the call may bring: its max tokens, else the model's maximum
        output, for each of its `n` choices."""
        limit = request.answer_limit
        if limit is None:
            try:
                limit = int(self.litellm.get_model_info(target.model)["max_output_tokens"])
            except Exception:  # a model litellm does not know: a typical long answer
                limit = FALLBACK_MAX_OUTPUT
        choices = request.body.get("n")
        if isinstance(choices, int) and not isinstance(choices, bool) and choices > 1:
            return limit * choices
        return limit

    def _price(self, target: CloudTarget, prompt: int, completion: int) -> float:
        try:
            cost = self.litellm.cost_per_token(
                model=target.model, prompt_tokens=prompt, completion_tokens=completion
            )
        except Exception:  # an unpriced model: unknown cost, never a failed request
            return 0.0
        return float(cost[0]) + float(cost[1])

    def _cost(self, result: Any) -> float:
        try:
            return float(self.litellm.completion_cost(completion_response=result))
        except Exception:  # an unpriced model costs what we cannot know: 0, not a failed request
            return 0.0


FALLBACK_MAX_OUTPUT = 4096
_CALLS = {"chat": "acompletion", "completions": "atext_completion", "embeddings": "aembedding"}


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


def _asks_usage(body: dict[str, Any]) -> bool:
    options = body.get("stream_options")
    return isinstance(options, dict) and bool(options.get("include_usage"))


def _mapped(target: str, exc: Exception) -> APIError:
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
