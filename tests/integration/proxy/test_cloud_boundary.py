"""The cloud boundary through the real proxy: nothing a body carries changes where a cloud call
goes, the credential it shows, what it costs or where its answer comes from.

Real processes: a cloud-personality simulator the policy's target reaches (it records every
request with a fingerprint of its credential), an "attacker" simulator no request may reach,
and the proxy, configured as users write it for OpenAI (no api_base: litellm's default, here
pointed at the simulator by OPENAI_BASE_URL) or with an explicit api_base.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from proxy.endpoints import ENDPOINTS
from tests.processes import (
    FAST_ENGINE,
    TEST_CLOUD_KEY,
    Process,
    backend_toml,
    cloud_toml,
    engine_flags,
    proxy,
    sim,
)

CLOUD = engine_flags(
    personality="cloud", decode_base_ms=1, output_tokens=12, output_distribution="fixed"
)
FORGED = "FORGED ANSWER"


def policy(engine: str, cloud_target: str, cache: bool = False) -> str:
    return f"""
[server]
probe_interval_s = 0.2
[retry]
attempts = 1
[cache]
enabled = {str(cache).lower()}
semantic = false
{backend_toml("local", "vllm", engine, {"sim-model": "sim-model"})}
{cloud_target}
[[routes]]
model = "m"
cloud = ["mini"]
"""


AS_USERS_WRITE_IT = (
    '[[clouds]]\nname = "mini"\nmodel = "openai/gpt-4o-mini"\napi_key_env = "TEST_CLOUD_KEY"\n'
)


@dataclass
class Boundary:
    proxy: Process
    cloud: Process
    attacker: Process

    def received(self, who: Process) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = httpx.get(who.url + "/_sim/requests").json()["requests"]
        return entries

    def spent(self) -> float:
        """The proxy's cloud spend, unrounded (/admin/status rounds to micro-dollars)."""
        text = httpx.get(self.proxy.url + "/metrics").text
        families = text_string_to_metric_families(text)
        cost = next(f for f in families if f.name == "overspill_cloud_cost_usd")
        return float(cost.samples[0].value)


@contextlib.contextmanager
def boundary(
    target: Callable[[str], str] = lambda cloud: AS_USERS_WRITE_IT, cache: bool = False
) -> Iterator[Boundary]:
    """`target`: the policy's [[clouds]] table, given the cloud simulator's URL."""
    with (
        sim(*FAST_ENGINE, "--model", "sim-model") as engine,
        sim(*CLOUD) as cloud,
        sim(*CLOUD) as attacker,
    ):
        text = policy(engine.url, target(cloud.url), cache)
        env = {"OPENAI_BASE_URL": cloud.url + "/v1", "OPENAI_API_KEY": "sk-not-this-one"}
        with proxy(text, env=env) as p:
            yield Boundary(p, cloud, attacker)


@pytest.fixture(scope="module")
def stack() -> Iterator[Boundary]:
    with boundary() as b:
        yield b


def attacks(attacker: str) -> dict[str, Any]:
    """More than twenty litellm arguments that would change destination, credentials, price,
    fallbacks or whether a call is made at all."""
    url = attacker + "/v1"
    return {
        "api_base": url,
        "base_url": url,
        "api_key": "sk-attacker",
        "api_version": "2099-01-01",
        "custom_llm_provider": "openai",
        "mock_response": FORGED,
        "mock_tool_calls": [{"id": "x", "type": "function"}],
        "mock_timeout": True,
        "fallbacks": [{"model": "openai/gpt-4o", "api_base": url}],
        "input_cost_per_token": 1.0,
        "output_cost_per_token": 1.0,
        "input_cost_per_second": 10.0,
        "output_cost_per_second": 10.0,
        "extra_headers": {"Authorization": "Bearer sk-attacker"},
        "headers": {"Authorization": "Bearer sk-attacker"},
        "extra_body": {"api_base": url},
        "organization": "evil",
        "timeout": 0.0001,
        "num_retries": 9,
        "max_retries": 9,
        "model_list": [{"model_name": "m", "litellm_params": {"api_base": url}}],
        "deployment_id": "x",
        "azure_ad_token": "t",
        "api_type": "azure",
        "aws_access_key_id": "AKIAATTACKER",
        "base_model": "gpt-4",
        "service_tier": "priority",
        "litellm_params": {"api_base": url},
        "caching": True,
        "drop_params": False,
    }


def body(content: str = "what is the boundary?", **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": content}], **extra}


def send(b: Boundary, payload: dict[str, Any], stream: bool = False) -> httpx.Response:
    return httpx.post(
        b.proxy.url + "/v1/chat/completions", json={**payload, "stream": stream}, timeout=60
    )


def content_of(response: httpx.Response, stream: bool) -> str:
    if not stream:
        return str(response.json()["choices"][0]["message"]["content"])
    import json

    parts = []
    for line in response.text.splitlines():
        if line.startswith("data: {"):
            for choice in json.loads(line[6:]).get("choices", []):
                parts.append(choice.get("delta", {}).get("content") or "")
    return "".join(parts)


def assert_only_the_policy_decides(
    b: Boundary, payload: dict[str, Any], stream: bool, baseline_cost: float
) -> httpx.Response:
    cloud_before, spent_before = len(b.received(b.cloud)), b.spent()
    response = send(b, payload, stream)
    assert response.status_code == 200, response.text
    assert response.headers["x-overspill-route"] == "cloud/mini"
    assert FORGED not in response.text
    assert content_of(response, stream)  # a real answer, from the simulator
    reached = b.received(b.cloud)
    assert len(reached) == cloud_before + 1  # exactly one call, to the policy's destination
    assert reached[-1]["headers"]["authorization"] == "…" + TEST_CLOUD_KEY[-4:]
    assert reached[-1]["path"] == "/v1/chat/completions"
    assert b.received(b.attacker) == []
    assert b.spent() - spent_before == pytest.approx(baseline_cost, rel=1e-6)
    return response


@pytest.fixture(scope="module")
def baseline(stack: Boundary) -> dict[bool, float]:
    costs = {}
    for stream in (False, True):
        before = stack.spent()
        assert send(stack, body(), stream).status_code == 200
        costs[stream] = stack.spent() - before
        assert costs[stream] > 0
    return costs


@pytest.mark.parametrize("key", sorted(attacks("http://x")))
def test_one_operator_argument_in_the_body_changes_nothing(
    stack: Boundary, baseline: dict[bool, float], key: str
) -> None:
    for stream in (False, True):
        payload = body(**{key: attacks(stack.attacker.url)[key]})
        response = assert_only_the_policy_decides(stack, payload, stream, baseline[stream])
        assert key in response.headers["x-overspill-dropped"].split(", ")


def test_all_of_them_together_change_nothing(stack: Boundary, baseline: dict[bool, float]) -> None:
    every = attacks(stack.attacker.url)
    for stream in (False, True):
        response = assert_only_the_policy_decides(stack, body(**every), stream, baseline[stream])
        assert set(response.headers["x-overspill-dropped"].split(", ")) == set(every)


names = st.text(
    st.characters(codec="ascii", exclude_categories=("Cc",)), min_size=1, max_size=24
).filter(lambda k: k not in ("model", "messages", "stream"))
values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.text(max_size=12),
    st.just("http://127.0.0.1:9/v1"),
)


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(extra=st.dictionaries(names, values, min_size=1, max_size=5))
def test_random_unknown_keys_change_nothing(
    stack: Boundary, baseline: dict[bool, float], extra: dict[str, Any]
) -> None:
    unknown = {k: v for k, v in extra.items() if k not in ENDPOINTS["chat"].cloud_params}
    if not unknown:
        return
    assert_only_the_policy_decides(stack, body(**unknown), False, baseline[False])


def test_base_url_does_not_win_over_the_policys_api_base() -> None:
    with boundary(lambda cloud: cloud_toml("mini", cloud)) as b:
        before = b.spent()
        assert send(b, body()).status_code == 200
        cost = b.spent() - before
        assert_only_the_policy_decides(b, body(base_url=b.attacker.url + "/v1"), False, cost)


def test_refuse_mode_names_the_field_and_sends_nothing() -> None:
    with sim(*FAST_ENGINE, "--model", "sim-model") as engine, sim(*CLOUD) as cloud:
        text = policy(engine.url, cloud_toml("mini", cloud.url)).replace(
            "[server]\n", '[server]\nunlisted_params = "refuse"\n'
        )
        with proxy(text) as p:
            attack = body(api_base="http://127.0.0.1:9/v1")
            response = httpx.post(p.url + "/v1/chat/completions", json=attack, timeout=60)
            assert response.status_code == 400
            error = response.json()["error"]
            assert error["param"] == "api_base"
            assert error["code"] == "unsupported_parameter"
            assert httpx.get(cloud.url + "/_sim/requests").json()["requests"] == []


def test_a_forged_answer_never_enters_the_cache() -> None:
    with boundary(cache=True) as b:
        forged = send(b, body("cache me", temperature=0, mock_response=FORGED))
        assert forged.status_code == 200
        assert FORGED not in forged.text
        again = send(b, body("cache me", temperature=0, mock_response=FORGED))
        assert again.headers["x-overspill-cache"].startswith("hit")
        assert FORGED not in again.text
        assert again.json()["choices"] == forged.json()["choices"]
        assert len(b.received(b.cloud)) == 1
        assert b.received(b.attacker) == []


def test_a_malformed_parameter_is_the_callers_400_and_never_opens_the_breaker(
    stack: Boundary,
) -> None:
    """A parameter of the wrong type is refused before the call (nothing is sent, relayed or
    through litellm): that says nothing about the target, so the breaker does not count it, the
    error names the parameter, and no caller's text reaches another's error."""
    secret = "bob's patient: Jane Roe, diagnosis X"
    completions = stack.proxy.url + "/v1/completions"
    before = len(stack.received(stack.cloud))
    for _ in range(6):  # more than the breaker's consecutive failures, each way
        bad = send(stack, body(response_format=secret))
        assert bad.status_code == 400
        assert bad.json()["error"]["code"] == "invalid_type"
        assert bad.json()["error"]["param"] == "response_format"
        assert secret not in bad.text
        empty = httpx.post(completions, json={"model": "m", "prompt": []}, timeout=60)
        assert empty.status_code == 400
        assert empty.json()["error"]["param"] == "prompt"
    assert len(stack.received(stack.cloud)) == before
    other = send(stack, body("anyone else"))
    assert other.status_code == 200
    assert secret not in other.text
    assert secret not in other.headers.get("x-overspill-reason", "")
    status = httpx.get(stack.proxy.url + "/admin/status").json()
    assert status["breakers"]["mini"]["state"] == "closed"


def test_tools_reach_the_cloud() -> None:
    with boundary() as b:
        tool = {
            "type": "function",
            "function": {
                "name": "weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
        response = send(b, body(tools=[tool]))
        assert response.status_code == 200, response.text
        assert b.received(b.cloud)[-1]["body"]["tools"][0]["function"]["name"] == "weather"


def test_nothing_but_the_usage_request_travels_in_stream_options(stack: Boundary) -> None:
    options = {"include_usage": False, "api_base": stack.attacker.url + "/v1", "x": {"y": 1}}
    response = send(stack, body(stream_options=options), stream=True)
    assert response.status_code == 200
    assert '"usage"' not in response.text  # the client asked for none: hidden
    assert stack.received(stack.cloud)[-1]["body"]["stream_options"] == {"include_usage": True}
    assert stack.received(stack.attacker) == []
