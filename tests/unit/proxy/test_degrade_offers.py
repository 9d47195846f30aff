"""proxy/flow/degrade.py: what a route's [routes.degrade] offers a request (pure)."""

from __future__ import annotations

import orjson

from policies.model import Degrade
from proxy.flow.degrade import capped, smaller_model
from proxy.schema import ProxyRequest, parse_request


def chat(**extra: object) -> ProxyRequest:
    body = {"model": "big", "messages": [{"role": "user", "content": "hi"}], **extra}
    return parse_request("chat", orjson.dumps(body))


def test_a_smaller_model_is_the_same_request_under_the_other_name() -> None:
    offer = smaller_model(chat(max_tokens=50), Degrade(model="small"))
    assert offer is not None
    request, note = offer
    assert (request.model, request.body["model"], request.body["max_tokens"]) == (
        "small",
        "small",
        50,
    )
    assert note == "model big -> small"
    assert smaller_model(chat(), Degrade(max_tokens=8)) is None


def test_the_cap_lowers_whichever_limit_the_request_uses() -> None:
    offer = capped(chat(max_tokens=500), Degrade(max_tokens=16))
    assert offer is not None
    assert offer[0].body["max_tokens"] == 16
    assert offer[1] == "max_tokens 500 -> 16"
    newer = capped(chat(max_completion_tokens=500), Degrade(max_tokens=16))
    assert newer is not None
    assert newer[0].body["max_completion_tokens"] == 16
    assert "max_tokens" not in newer[0].body
    unset = capped(chat(), Degrade(max_tokens=16))
    assert unset is not None
    assert unset[1] == "max_tokens unset -> 16"


def test_no_cap_is_offered_to_a_request_that_asks_for_no_more() -> None:
    assert capped(chat(max_tokens=10), Degrade(max_tokens=16)) is None
    assert capped(chat(max_tokens=16), Degrade(max_tokens=16)) is None
    assert capped(chat(max_tokens=500), Degrade(model="small")) is None
