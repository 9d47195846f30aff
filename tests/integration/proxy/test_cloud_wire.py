"""A cloud target that speaks OpenAI's wire format (`wire = "openai"`), through real processes:
the proxy (local engine down) and a cloud-personality simulator that records what it receives,
driven by the official openai SDK. The call carries the provider's model name, the operator's
key and only the allow-listed parameters; the answer comes back whole or streamed as the
provider sent it, the usage chunk only when asked; the spend is counted.

"As the provider sent it" is checked byte for byte: the request the simulator recorded is sent
to it again directly (same body, same request id, so the same id and, with a seed, the same
words), and the two answers compared."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from proxy.schema import parse_request
from tests.clients import assert_openai_error
from tests.processes import (
    TEST_CLOUD_KEY,
    Process,
    backend_toml,
    cloud_toml,
    engine_flags,
    proxy,
    sim,
)
from tests.waits import wait_until

ROUTE = '[[routes]]\nmodel = "m"\ncloud = ["mini"]\n'
AUTH = {"authorization": "Bearer sk-client"}


@pytest.fixture(scope="module")
def wired() -> Iterator[tuple[Process, Process]]:
    # blocks larger than any prompt here: a request sent again finds nothing in the prefix cache,
    # so its usage (cached_tokens) is the same as the first time
    flags = engine_flags(personality="cloud", decode_base_ms=1, output_tokens=5, block_size=1024)
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
        user="jane@exemplo.com",
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
            text = "Write to jane.doe@exemplo.com today"
            stream = client(p).chat.completions.create(
                model="m", messages=[{"role": "user", "content": text}], stream=True
            )
            pieces = [c.choices[0].delta.content or "" for c in stream if c.choices]
            assert "".join(pieces) == text
            left = last_received(cloud)["body"]["messages"][0]["content"]
            assert left == "Write to <EMAIL_1> today"


_CREATED = re.compile(rb'"created":(\d+)')


def relayed_and_sent(
    p: Process, cloud: Process, stream: bool, include_usage: bool
) -> tuple[bytes, bytes]:
    """The answer's bytes as the proxy relayed them, and as the provider sends them for the
    request it received (sent to it again directly). `created` is the second an answer was
    made: a pair that straddles a second boundary is made again, with a new prompt."""
    for _ in range(3):
        body: dict[str, Any] = {
            "model": "m",
            "messages": [{"role": "user", "content": f"bytes {uuid.uuid4().hex[:8]}"}],
            "seed": 7,  # the simulator's words depend on model, prompt and seed only
            "stream": stream,
        }
        if include_usage:
            body["stream_options"] = {"include_usage": True}
        auth = {"authorization": "Bearer sk-client"}
        relayed = httpx.post(p.url + "/v1/chat/completions", json=body, headers=auth)
        assert relayed.status_code == 200, relayed.text
        assert relayed.headers["x-overspill-route"] == "cloud/mini"
        received = last_received(cloud)
        rid = {"x-request-id": received["headers"]["x-request-id"]}
        sent = httpx.post(cloud.url + "/v1/chat/completions", json=received["body"], headers=rid)
        assert sent.status_code == 200, sent.text
        if set(_CREATED.findall(relayed.content)) == set(_CREATED.findall(sent.content)):
            return relayed.content, sent.content
    raise AssertionError("three answers in a row straddled a second boundary")


def test_a_stream_is_the_providers_bytes(wired: tuple[Process, Process]) -> None:
    """Asked for usage, nothing is hidden: the very bytes, the provider's model name in them."""
    p, cloud = wired
    relayed, sent = relayed_and_sent(p, cloud, stream=True, include_usage=True)
    assert relayed.count(b"data: {") > 3  # a real stream: role, words, end, usage
    assert b'"model":"gpt-4o-mini"' in relayed
    assert relayed == sent


def test_a_stream_without_usage_differs_only_by_the_usage(wired: tuple[Process, Process]) -> None:
    """Not asked for usage: the provider's bytes less its usage chunk and the `"usage":null`
    it writes in every chunk once usage is asked for (the proxy always asks, to price)."""
    p, cloud = wired
    relayed, sent = relayed_and_sent(p, cloud, stream=True, include_usage=False)
    events = sent.split(b"\n\n")
    usage_events = [e for e in events if b'"choices":[],"usage":{' in e]
    assert len(usage_events) == 1
    expected = b"\n\n".join(e for e in events if e not in usage_events)
    assert relayed == expected.replace(b',"usage":null', b"")
    assert b"usage" not in relayed


def test_a_whole_answer_is_the_providers_bytes(wired: tuple[Process, Process]) -> None:
    p, cloud = wired
    relayed, sent = relayed_and_sent(p, cloud, stream=False, include_usage=False)
    assert b'"usage":{' in relayed
    assert relayed == sent


# A provider that compresses (issue 30, finding 4): OpenAI behind Cloudflare answers gzip to a
# caller that accepts it. On `wire = "auto"` (the default for openai/ models) the proxy relays
# the provider's bytes, so it must ask for them as they are, and refuse what it cannot read.

LENIENT = (
    "[breaker]\nconsecutive_failures = 1000\nmin_calls = 1000\n[retry]\nattempts = 1\n"
    "[cache]\nsemantic = false\n"
)


@pytest.fixture(scope="module")
def auto_wired() -> Iterator[tuple[Process, Process]]:
    flags = engine_flags(personality="cloud", decode_base_ms=1, output_tokens=5, block_size=1024)
    with sim(*flags, "--model", "gpt-4o-mini", "--fault", "gzip=accepted") as cloud:
        down = backend_toml("gone", "vllm", "http://127.0.0.1:9", {"m": "m"})
        target = cloud_toml("mini", cloud.url)  # no wire: "auto"
        with proxy(down + target + ROUTE + LENIENT) as p:
            yield p, cloud


def litellm_price(prompt: int, completion: int) -> float:
    """What the provider's usage costs by litellm's tables, which the proxy prices with."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    cost = litellm.cost_per_token(
        model="openai/gpt-4o-mini", prompt_tokens=prompt, completion_tokens=completion
    )
    return float(cost[0]) + float(cost[1])


def asked(text: str, **extra: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [{"role": "user", "content": f"{text} {uuid.uuid4().hex[:8]}"}],
        "temperature": 0,
        "max_tokens": 40,
        **extra,
    }


def test_a_compressing_provider_is_asked_for_identity_and_its_answers_cached_readable(
    auto_wired: tuple[Process, Process],
) -> None:
    p, cloud = auto_wired
    direct = httpx.post(cloud.url + "/v1/chat/completions", json=asked("x", model="gpt-4o-mini"))
    assert direct.headers["content-encoding"] == "gzip"  # as the provider answers httpx
    body = asked("compressed")
    before = spent(p)
    first = client(p).chat.completions.with_raw_response.create(**body)
    completion = first.parse()  # JSON: the SDK reads it
    assert first.headers["content-type"] == "application/json"
    assert completion.choices[0].message.content
    assert last_received(cloud)["headers"]["accept-encoding"] == "identity"
    usage = completion.usage
    assert usage is not None
    assert spent(p) - before == pytest.approx(
        litellm_price(usage.prompt_tokens, usage.completion_tokens), rel=1e-9
    )
    again = client(p).chat.completions.with_raw_response.create(**body)
    assert again.headers["x-overspill-cache"] == "hit-exact"  # stored readable: not a 500
    assert again.parse().choices[0].message.content == completion.choices[0].message.content


def test_a_compressing_providers_stream_is_relayed_as_events_and_billed_its_usage(
    auto_wired: tuple[Process, Process],
) -> None:
    p, _ = auto_wired
    body = asked("streamed", stream=True, stream_options={"include_usage": True})
    before = spent(p)
    chunks = list(client(p).chat.completions.create(**body))
    usage = chunks[-1].usage
    assert usage is not None
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert spent(p) - before == pytest.approx(
        litellm_price(usage.prompt_tokens, usage.completion_tokens), rel=1e-9
    )
    again = httpx.post(p.url + "/v1/chat/completions", json=body, headers=AUTH)
    assert again.headers["x-overspill-cache"] == "hit-exact"
    assert again.headers["content-type"] == "text/event-stream"
    assert again.content.startswith(b"data: {")


@pytest.mark.parametrize("stream", [False, True])
def test_a_provider_that_compresses_anyway_is_a_502_never_stored_and_billed_at_most(
    auto_wired: tuple[Process, Process], stream: bool
) -> None:
    """A gateway that ignores the identity asked for: nothing it sent reaches the client or
    the cache; what it used cannot be read, so the call is billed the most it could cost."""
    p, cloud = auto_wired
    body = asked("ignored", stream=stream)
    most = litellm_price(parse_request("chat", orjson.dumps(body)).prompt_estimate, 40)
    httpx.post(cloud.url + "/_sim/faults", json={"gzip": "always"}).raise_for_status()
    try:
        before = spent(p)
        for _ in range(2):
            refused = httpx.post(p.url + "/v1/chat/completions", json=body, headers=AUTH)
            error = assert_openai_error(refused, 502)
            assert error["code"] == "upstream_unreadable"
            assert refused.headers.get("x-overspill-cache") != "hit-exact"
        assert spent(p) - before == pytest.approx(2 * most, rel=1e-9)
    finally:
        httpx.post(cloud.url + "/_sim/faults", json={"gzip": "accepted"}).raise_for_status()


@pytest.mark.parametrize(
    ("faults", "status"),
    [({"error_rate": 1, "error_status": 500}, 502), ({"rate_limit_rate": 1}, 429)],
    ids=["500", "429"],
)
def test_a_providers_error_words_reach_the_log_and_never_the_client(
    auto_wired: tuple[Process, Process], faults: dict[str, object], status: int
) -> None:
    """A provider (or a gateway before it) that says the operator's organisation and echoes
    its key (issue 30, finding 9): the client gets the proxy's words naming the target; the
    log gets the provider's, the key masked."""
    p, cloud = auto_wired
    echo = f"in organization org-Q7x9Lm2Kp4Zr, key {TEST_CLOUD_KEY}"
    httpx.post(cloud.url + "/_sim/faults", json={**faults, "error_text": echo})
    try:
        refused = httpx.post(p.url + "/v1/chat/completions", json=asked("fails"), headers=AUTH)
        error = assert_openai_error(refused, status)
        assert f"mini answered {faults.get('error_status', 429)}" in error["message"]
        for secret in (TEST_CLOUD_KEY, "org-Q7x9Lm2Kp4Zr", "fault injection"):
            assert secret not in refused.text
        masked = f"org-Q7x9Lm2Kp4Zr, key …{TEST_CLOUD_KEY[-4:]}"
        wait_until(lambda: any(masked in line for line in p.output), "the provider's words")
        assert not any(TEST_CLOUD_KEY in line for line in p.output)
    finally:
        reset = {"error_rate": 0, "rate_limit_rate": 0, "error_text": ""}
        httpx.post(cloud.url + "/_sim/faults", json=reset).raise_for_status()
