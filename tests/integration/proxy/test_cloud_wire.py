"""A cloud target that speaks OpenAI's wire format (`wire = "openai"`), through real processes:
the proxy (local engine down) and a cloud-personality simulator that records what it receives,
driven by the official openai SDK. The call carries the provider's model name, the operator's
key and only the allow-listed parameters; the answer comes back whole or streamed as the
provider sent it, the usage chunk only when asked; the spend is counted."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.processes import (
    TEST_CLOUD_KEY,
    Process,
    backend_toml,
    cloud_toml,
    engine_flags,
    proxy,
    sim,
)

ROUTE = '[[routes]]\nmodel = "m"\ncloud = ["mini"]\n'


@pytest.fixture(scope="module")
def wired() -> Iterator[tuple[Process, Process]]:
    flags = engine_flags(personality="cloud", decode_base_ms=1, output_tokens=5)
    with sim(*flags, "--model", "gpt-4o-mini") as cloud:
        down = backend_toml("gone", "vllm", "http://127.0.0.1:9", {"m": "m"})
        target = cloud_toml("mini", cloud.url) + 'wire = "openai"\n'
        with proxy(down + target + ROUTE) as p:
            yield p, cloud


def last_received(cloud: Process) -> dict[str, Any]:
    got: dict[str, Any] = httpx.get(cloud.url + "/_sim/requests").json()["requests"][-1]
    return got


def client(p: Process) -> openai.OpenAI:
    return openai.OpenAI(base_url=p.url + "/v1", api_key="sk-client", max_retries=0)


def spent(p: Process) -> float:
    families = text_string_to_metric_families(httpx.get(p.url + "/metrics").text)
    cost = next(f for f in families if f.name == "overspill_cloud_cost_usd")
    return float(cost.samples[0].value)


def test_a_whole_answer_comes_back_as_the_provider_sent_it(wired: tuple[Process, Process]) -> None:
    p, cloud = wired
    before = spent(p)
    answer = client(p).chat.completions.with_raw_response.create(
        model="m",
        messages=[{"role": "user", "content": "hello"}],
        user="jane@example.com",
        extra_body={"api_base": "http://evil.example", "mock_response": "owned"},
    )
    assert answer.headers["x-overspill-route"] == "cloud/mini"
    completion = answer.parse()
    assert completion.choices[0].message.content
    assert completion.usage is not None
    received = last_received(cloud)
    body = received["body"]
    assert body["model"] == "gpt-4o-mini"  # the provider's name for it
    assert "user" not in body  # who the user is stays behind
    assert "api_base" not in body
    assert "mock_response" not in body
    assert "user" in answer.headers["x-overspill-dropped"]
    assert spent(p) > before  # priced by litellm's tables


def test_a_stream_is_relayed_and_shows_usage_only_when_asked(
    wired: tuple[Process, Process],
) -> None:
    p, cloud = wired
    chunks = list(
        client(p).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hello"}], stream=True
        )
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert all(c.usage is None for c in chunks)  # not asked: not shown
    assert last_received(cloud)["body"]["stream_options"] == {"include_usage": True}
    asked = list(
        client(p).chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "hello"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert asked[-1].usage is not None
    assert asked[-1].choices == []  # the provider's usage chunk, as it sent it
    assert asked[-1].usage.completion_tokens > 0


def test_the_operators_key_goes_to_the_provider(wired: tuple[Process, Process]) -> None:
    p, cloud = wired
    client(p).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    headers = {k.lower(): v for k, v in last_received(cloud)["headers"].items()}
    assert headers["authorization"] == "…" + TEST_CLOUD_KEY[-4:]  # the simulator's fingerprint


REDACTING = """
[privacy]
levels = [{ name = "public" }, { name = "personal", redact = true }]
[privacy.detectors]
email = "personal"
"""


def test_a_redacted_stream_over_the_wire_comes_back_whole() -> None:
    """The echo simulator repeats what it got: placeholders, in pieces, restored on the way."""
    flags = engine_flags(personality="cloud", decode_base_ms=1, output_distribution="echo")
    with sim(*flags) as cloud:
        down = backend_toml("gone", "vllm", "http://127.0.0.1:9", {"m": "m"})
        target = cloud_toml("mini", cloud.url) + 'wire = "openai"\n'
        with proxy(down + target + ROUTE + REDACTING) as p:
            text = "Write to jane.doe@example.com today"
            stream = client(p).chat.completions.create(
                model="m", messages=[{"role": "user", "content": text}], stream=True
            )
            pieces = [c.choices[0].delta.content or "" for c in stream if c.choices]
            assert "".join(pieces) == text
            left = last_received(cloud)["body"]["messages"][0]["content"]
            assert left == "Write to <EMAIL_1> today"
