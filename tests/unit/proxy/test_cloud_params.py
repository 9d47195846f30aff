"""proxy/legs/cloud_params.py:
only the OpenAI API's own parameters leave a body for a cloud call."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.endpoints import ENDPOINTS
from proxy.errors import BadRequest
from proxy.legs.cloud_params import (
    IDENTIFY_USER,
    SET_BY_PROXY,
    Outbound,
    dropped_header,
    outbound,
)

# litellm keyword arguments that are the operator's: destination, credentials, price, whether a
# call is made, what is called next.
OPERATORS = [
    "api_base",
    "base_url",
    "api_key",
    "api_version",
    "custom_llm_provider",
    "mock_response",
    "mock_tool_calls",
    "mock_timeout",
    "fallbacks",
    "input_cost_per_token",
    "output_cost_per_token",
    "input_cost_per_second",
    "output_cost_per_second",
    "extra_headers",
    "headers",
    "extra_body",
    "organization",
    "timeout",
    "num_retries",
    "max_retries",
    "model_list",
    "deployment_id",
    "azure_ad_token",
    "api_type",
    "aws_access_key_id",
    "caching",
    "base_model",
    "drop_params",
    "litellm_params",
    "metadata",
    "store",
    "service_tier",
]
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0}


@pytest.mark.parametrize("key", OPERATORS)
def test_an_operator_argument_never_leaves_the_body(key: str) -> None:
    sent = outbound("chat", {**CHAT, key: "http://127.0.0.1:1/v1"})
    assert key not in sent.params
    assert sent.dropped == (key,)
    assert sent.params == {"messages": CHAT["messages"], "temperature": 0}


@pytest.mark.parametrize("endpoint", ["chat", "completions", "embeddings"])
def test_no_endpoint_allows_an_operator_argument(endpoint: str) -> None:
    assert not set(OPERATORS) & ENDPOINTS[endpoint].cloud_params


def test_refuse_names_the_first_unlisted_field() -> None:
    with pytest.raises(BadRequest) as refused:
        outbound("chat", {**CHAT, "mock_response": "x", "api_base": "y"}, "refuse")
    assert refused.value.param == "api_base"
    assert refused.value.code == "unsupported_parameter"
    assert refused.value.status == 400


def test_the_api_parameters_pass_untouched() -> None:
    body = {
        **CHAT,
        "tools": [{"type": "function", "function": {"name": "f"}}],
        "response_format": {"type": "json_object"},
        "seed": 3,
        "stream_options": {"include_usage": True},
        "max_completion_tokens": 9,
    }
    sent = outbound("chat", body, "refuse")
    assert sent.dropped == ()
    assert sent.params == {k: v for k, v in body.items() if k not in SET_BY_PROXY}


@pytest.mark.parametrize("endpoint", ["chat", "completions", "embeddings"])
def test_who_the_user_is_stays_behind_unless_the_policy_sends_it(endpoint: str) -> None:
    base = {"chat": CHAT, "completions": {"prompt": "p"}, "embeddings": {"input": "x"}}[endpoint]
    body = {**base, "user": "jane@exemplo.com", "safety_identifier": "h-123"}
    withheld = outbound(endpoint, body, "refuse")  # withheld by policy: never a 400
    assert "user" not in withheld.params
    assert "safety_identifier" not in withheld.params
    assert "user" in withheld.dropped
    sent = outbound(endpoint, body, "drop", send_user=True)
    assert sent.params["user"] == "jane@exemplo.com"


def test_a_hostile_name_is_cut_and_made_printable_before_it_is_echoed() -> None:
    header = dropped_header(("é\r\nSet-Cookie: x" + "a" * 5000,))
    assert b"\r" not in header
    assert b"\n" not in header
    assert len(header) <= 64
    assert header.isascii()


body_keys = st.text(min_size=1, max_size=40)
values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=30),
    st.lists(st.integers(), max_size=3),
)


@settings(deadline=None)  # pure, but a loaded machine may pause any example
@given(
    extra=st.dictionaries(body_keys, values, max_size=8),
    endpoint=st.sampled_from(["chat", "completions", "embeddings"]),
)
def test_random_extra_keys_only_ever_add_allowed_parameters(
    extra: dict[str, Any], endpoint: str
) -> None:
    base = {
        "chat": CHAT,
        "completions": {"model": "m", "prompt": "p"},
        "embeddings": {"model": "m", "input": "x"},
    }[endpoint]
    body = {**extra, **base}
    sent = _sent_or_refusal(endpoint, body)
    if isinstance(sent, BadRequest):  # an allowed parameter of the wrong type: named, not sent
        assert sent.code == "invalid_type"
        assert sent.param in ENDPOINTS[endpoint].cloud_params
        return
    assert set(sent.params) <= ENDPOINTS[endpoint].cloud_params
    assert set(sent.params) | set(sent.dropped) | (set(body) & SET_BY_PROXY) == set(body)
    allowed = ENDPOINTS[endpoint].cloud_params - IDENTIFY_USER  # [privacy] send_user is off
    unknown = {k for k in extra if k not in allowed and k not in SET_BY_PROXY}
    assert set(sent.dropped) == unknown


def _sent_or_refusal(endpoint: Any, body: dict[str, Any]) -> Outbound | BadRequest:
    try:
        return outbound(endpoint, body)
    except BadRequest as refused:
        return refused
