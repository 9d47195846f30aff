"""Cloud targets that speak OpenAI's wire format (`[[clouds]] wire = "openai"`: OpenAI itself,
and the many hosts and gateways that serve its API), reached as the local leg reaches an engine:
the request's allow-listed parameters as JSON through the one aiohttp session, the answer's
bytes relayed as they come (proxy/legs/wire_answer.py). litellm stays what it is for: the
providers with other formats, and the price tables (read here to bill the answer).

What the call carries is built here alone: the target's model, its key (from the environment
variable the policy names), the stream's usage request; only the body's allow-listed
parameters travel (proxy/legs/cloud_params.py), as on the litellm path.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import orjson

from policies.model import CloudTarget
from proxy.errors import UpstreamUnreadable
from proxy.legs.cloud import max_output, most_tokens
from proxy.legs.cloud_params import Unlisted, asks_usage, outbound
from proxy.legs.upstream import EngineClient
from proxy.legs.wire_answer import WireAnswer, WireBill
from proxy.schema import ProxyRequest

OPENAI_API = "https://api.openai.com/v1"
_PROVIDER = "openai/"  # litellm's prefix: the provider's own name for the model follows it


def wire_model(target: CloudTarget) -> str:
    """The model's name as the provider knows it."""
    return target.model.removeprefix(_PROVIDER)


def wire_url(target: CloudTarget, request: ProxyRequest) -> str:
    """The endpoint's URL at the target: its API base (`.../v1`) and the endpoint's path."""
    # without one, where OpenAI's own SDK (and litellm) would send it: OPENAI_BASE_URL, the
    # operator's environment, else OpenAI
    base = (target.api_base or os.environ.get("OPENAI_BASE_URL") or OPENAI_API).rstrip("/")
    return base + request.path.removeprefix("/v1")


def wire_body(target: CloudTarget, request: ProxyRequest, params: dict[str, Any]) -> bytes:
    """The allow-listed parameters, and what only the operator sets: the model, the stream,
    and for a stream its usage (always asked for: it prices the answer)."""
    body = {key: value for key, value in params.items() if key != "stream_options"}
    body["model"] = wire_model(target)
    if request.stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return orjson.dumps(body)


def wire_headers(target: CloudTarget, request_id: str) -> dict[str, str]:
    headers = {"content-type": "application/json", "x-request-id": request_id}
    key = os.environ.get(target.api_key_env or "OPENAI_API_KEY", "")
    if key:
        headers["authorization"] = f"Bearer {key}"
    return headers


async def open_wire(
    client: EngineClient,
    target: CloudTarget,
    request: ProxyRequest,
    request_id: str,
    price: Callable[[int, int], float],
    charge: Callable[[float], None],
    unlisted: Unlisted = "drop",
    send_user: bool = False,
) -> WireAnswer:
    """One call to the target: its answer with the bill attached (errors are the engine
    client's: a 4xx ends the chain, a 5xx, 429 or a lost connection may be retried; an answer
    that cannot be read is a 502, charged at the most the call could cost)."""
    sent = outbound(request.endpoint, request.body, unlisted, send_user)
    body = wire_body(target, request, sent.params)
    url = wire_url(target, request)
    headers = wire_headers(target, request_id)

    def worst() -> float:
        limit = most_tokens(request, lambda: max_output(target.model))
        return price(request.prompt_estimate, limit)

    try:
        answer = await client.open(target.name, url, body, headers, request.stream)
    except UpstreamUnreadable:
        # it answered, and bills it; what it used cannot be read: the most it could cost
        charge(worst())
        raise
    bill = WireBill(price, charge, request.prompt_estimate, worst)
    return WireAnswer(answer, bill, request.stream, asks_usage(request.body), sent.dropped)
