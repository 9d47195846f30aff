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
import functools
import math
import os
from collections.abc import Callable
from typing import Any

import orjson

from policies.model import CloudTarget
from proxy.endpoints import ENDPOINTS
from proxy.errors import UpstreamUnavailable
from proxy.legs.cloud_answer import CloudAnswer, StreamBill
from proxy.legs.cloud_errors import reported
from proxy.legs.cloud_params import Unlisted, asks_usage, outbound
from proxy.schema import ProxyRequest


def _litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


# A model whose price is not per token alike (it has tiers), as _rates_of says it.
TIERED = (math.nan, math.nan)
# Tokens past the highest tier litellm's tables price (128k, 200k, 272k): a tiered model's
# price at this count is not its first token's price times the count.
_PAST_EVERY_TIER = 2_000_000


class Cloud:
    def __init__(self) -> None:
        self._module: Any = None
        self.spent = 0.0  # USD by litellm's price tables, for /metrics
        self._rates: dict[str, tuple[float, float]] = {}  # per model: Cloud.price

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
        send_user: bool = False,
    ) -> CloudAnswer:
        """`charge` is called once with the answer's cost (a stream's when it ends, however it
        ends). Only the body's allow-listed parameters reach litellm: where the call goes, with
        which key, at what price, comes from the policy alone."""
        sent = outbound(request.endpoint, request.body, unlisted, send_user)

        def bill(usd: float) -> None:
            self.spent += usd
            charge(usd)

        params = {**sent.params, **self._operator_params(target, request, request_id)}
        call = getattr(self._loaded(target.name), ENDPOINTS[request.endpoint].cloud_call)
        try:
            result = await call(**params)
        except Exception as exc:
            raise reported(target.name, exc, request_id, params["api_key"] or "") from exc
        except asyncio.CancelledError:
            # The client left while the provider worked: it may generate the whole answer, and
            # bill it. Charged as the most it could have cost, so leaving never pays less.
            bill(self.worst_case(target, request))
            raise
        return self._answer(target, request, request_id, result, bill, sent.dropped)

    def _answer(
        self,
        target: CloudTarget,
        request: ProxyRequest,
        request_id: str,
        result: Any,
        bill: Callable[[float], None],
        dropped: tuple[str, ...],
    ) -> CloudAnswer:
        """litellm's result as the Answer protocol: a stream billed as it ends, or a whole
        answer billed now."""
        if request.stream:
            price = functools.partial(self.price, target)
            stream_bill = StreamBill(price, bill, request.prompt_estimate)
            shown = asks_usage(request.body)
            return CloudAnswer(
                target.name,
                True,
                request_id=request_id,
                source=result,
                bill=stream_bill,
                show_usage=shown,
                dropped=dropped,
            )
        payload = result.model_dump(exclude_none=True)
        cost = self._cost(result)
        bill(cost)
        usage = payload.get("usage") or {}
        body = orjson.dumps(payload)
        return CloudAnswer(target.name, False, body, cost=cost, usage=usage, dropped=dropped)

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

    def worst_case(self, target: CloudTarget, request: ProxyRequest) -> float:
        """The most the call may cost: its prompt, and the most answer tokens it may bring."""
        return self.price(target, request.prompt_estimate, self._most_tokens(target, request))

    def _most_tokens(self, target: CloudTarget, request: ProxyRequest) -> int:
        return most_tokens(request, lambda: max_output(target.model))

    def price(self, target: CloudTarget, prompt: int, completion: int) -> float:
        """USD for these tokens at the target's price (litellm's tables; 0 if unpriced). One
        look-up in litellm's tables costs about half a millisecond of CPU, as much as relaying
        the answer: a model priced per token is looked up once, and priced by its rates after."""
        rates = self._rates.get(target.model)
        if rates is None:
            rates = self._rates[target.model] = self._rates_of(target.model)
        if rates is TIERED:
            return self._tokens_cost(target.model, prompt, completion)
        return prompt * rates[0] + completion * rates[1]

    def _rates_of(self, model: str) -> tuple[float, float]:
        """(per prompt token, per completion token), or TIERED for a model whose price per
        token changes with the count (litellm's `_above_128k_tokens` prices and the like)."""
        per_prompt = self._tokens_cost(model, 1, 0)
        per_completion = self._tokens_cost(model, 0, 1)
        many = self._tokens_cost(model, _PAST_EVERY_TIER, _PAST_EVERY_TIER)
        linear = _PAST_EVERY_TIER * (per_prompt + per_completion)
        return (per_prompt, per_completion) if math.isclose(many, linear) else TIERED

    def _tokens_cost(self, model: str, prompt: int, completion: int) -> float:
        try:
            cost = self.litellm.cost_per_token(
                model=model, prompt_tokens=prompt, completion_tokens=completion
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


def most_tokens(request: ProxyRequest, model_limit: Callable[[], int]) -> int:
    """The most answer tokens a call may bring: its max tokens, else the model's maximum output
    (`model_limit`, asked only then), for each answer it makes (prompts, `n`, `best_of`)."""
    limit = request.answer_limit
    if limit is None:
        limit = model_limit()
    return limit * request.answers


def max_output(model: str) -> int:
    """The model's maximum output by litellm's tables."""
    try:
        return int(_litellm().get_model_info(model)["max_output_tokens"])
    except Exception:  # a model litellm does not know (or no litellm): a typical long answer
        return FALLBACK_MAX_OUTPUT
