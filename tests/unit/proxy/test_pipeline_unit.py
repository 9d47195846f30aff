"""The request path without sockets or processes: the real Pipeline (under the real ASGI
response, PipelineResponse) with scripted engine and cloud legs and a fake clock. Each test is
one branch: where a request goes, what is retried, what falls back, what never leaves.

Process-level tests (tests/integration/proxy/test_*.py, with real simulators) keep the
end-to-end promises; these show the branches in milliseconds."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from typing import Any

import orjson
import pytest

from proxy.errors import UpstreamUnavailable
from proxy.ops.explain import explanation
from proxy.schema import parse_request
from tests.unit.proxy.pipeline_harness import (
    POLICY,
    ask,
    chat_answer,
    harness,
    refused,
    status,
)


async def test_an_idle_local_engine_answers() -> None:
    h = harness({"a": [chat_answer("local")], "b": [chat_answer("local")]})
    sent = await h.send(ask())
    assert sent.status == 200
    assert sent.headers["x-overspill-route"] in ("local/a", "local/b")
    assert sent.json["choices"][0]["message"]["content"] == "local"
    assert h.cloud.received == []


async def test_an_engine_that_cannot_be_reached_is_marked_down_and_the_other_answers() -> None:
    h = harness({"a": [refused()], "b": [chat_answer("b")]})
    h.pipeline.runtime.backends.monitors["b"].waiting = 1  # a has less outstanding: tried first
    sent = await h.send(ask())
    assert sent.status == 200
    assert sent.headers["x-overspill-route"] == "local/b"
    assert h.engines.calls == ["a", "b"]  # not connected, another target open: moved on at once
    assert h.clock.slept == []
    assert not h.pipeline.runtime.backends.monitors["a"].healthy


async def test_the_last_target_that_cannot_be_connected_to_is_retried_as_the_policy_says() -> None:
    h = harness({"a": [refused(), refused(), chat_answer("back")], "b": [refused()]})
    h.pipeline.runtime.backends.monitors["b"].healthy = False  # only a is left
    sent = await h.send(ask(), {"x-overspill-privacy": "restricted"})  # and no cloud
    assert sent.status == 200
    assert h.engines.calls == ["a", "a", "a"]  # it may be restarting: retried, and it was
    assert h.clock.slept == [0.1, 0.2]


async def test_a_connection_lost_before_the_answer_is_retried_on_the_same_engine() -> None:
    lost = UpstreamUnavailable("connection lost before answering")
    h = harness({"a": [lost, chat_answer("a")], "b": [chat_answer("b")]})
    h.pipeline.runtime.backends.monitors["b"].waiting = 1  # a first
    sent = await h.send(ask())
    assert sent.headers["x-overspill-route"] == "local/a"
    assert h.engines.calls == ["a", "a"]
    # a connection the engine closed says nothing of the engine: it keeps its traffic
    assert h.pipeline.runtime.backends.monitors["a"].healthy


async def test_a_retryable_failure_is_retried_on_the_same_engine_with_backoff() -> None:
    h = harness(
        {
            "a": [status(502), status(503), chat_answer("third")],
            "b": [status(502), status(503), chat_answer("third")],
        }
    )
    sent = await h.send(ask())
    assert sent.status == 200
    assert len(set(h.engines.calls)) == 1  # three tries, one engine
    assert len(h.engines.calls) == 3
    assert h.clock.slept == [0.1, 0.2]


async def test_when_every_local_engine_fails_the_cloud_answers() -> None:
    h = harness({"a": [status(502)], "b": [status(502)]})
    sent = await h.send(ask())
    assert sent.status == 200
    assert sent.headers["x-overspill-route"] == "cloud/mini"
    assert sent.json["choices"][0]["message"]["content"] == "from mini"
    assert sorted(set(h.engines.calls)) == ["a", "b"]
    assert len(h.cloud.received) == 1


async def test_a_restricted_request_never_reaches_the_cloud_even_when_every_engine_fails() -> None:
    h = harness({"a": [status(502)], "b": [status(502)]})
    sent = await h.send(ask(), {"x-overspill-privacy": "restricted"})
    assert sent.status == 502
    assert sent.headers["x-overspill-privacy"] == "restricted"
    assert "every target failed" in sent.json["error"]["message"]
    assert h.cloud.received == []


async def test_a_client_error_from_the_engine_is_not_tried_elsewhere() -> None:
    h = harness({"a": [status(400)], "b": [status(400)]})
    sent = await h.send(ask())
    assert sent.status == 400
    assert sent.json["error"]["message"] == "engine answered 400"  # not the engine's words
    assert len(h.engines.calls) == 1
    assert h.cloud.received == []


async def test_an_unknown_model_is_a_404_naming_what_exists() -> None:
    h = harness({"a": [chat_answer("x")], "b": [chat_answer("x")]})
    sent = await h.send({"model": "nope", "messages": [{"role": "user", "content": "hi"}]})
    assert sent.status == 404
    assert "Available: m" in sent.json["error"]["message"]
    assert h.engines.calls == []


@pytest.mark.parametrize("running", [8, 100])
async def test_a_saturated_local_engine_overflows_to_the_cloud(running: int) -> None:
    text = POLICY.replace('cloud = ["mini"]', 'cloud = ["mini"]\noverflow = { max_waiting = 2 }')
    h = harness({"a": [chat_answer("local")], "b": [chat_answer("local")]}, text)
    for monitor in h.pipeline.runtime.backends.monitors.values():
        monitor.running, monitor.waiting = running, 5  # past max_waiting on both
    sent = await h.send(ask())
    assert sent.headers["x-overspill-route"] == "cloud/mini"
    assert h.engines.calls == []
    assert "saturated" in sent.headers["x-overspill-reason"]


async def test_a_restricted_request_waits_for_a_local_engine_and_goes_when_one_frees() -> None:
    text = POLICY.replace('cloud = ["mini"]', 'cloud = ["mini"]\noverflow = { max_waiting = 2 }')
    h = harness({"a": [chat_answer("waited")], "b": [chat_answer("waited")]}, text)
    backends = h.pipeline.runtime.backends
    for monitor in backends.monitors.values():
        monitor.waiting = 5  # both past max_waiting
    waiting = asyncio.create_task(h.send(ask(), {"x-overspill-privacy": "restricted"}))
    room = h.pipeline.runtime.room
    for _ in range(2000):  # until it sits in the waiting room (no timing: a bounded poll)
        if room.waiting("m") == 1:
            break
        await asyncio.sleep(0.001)
    assert room.waiting("m") == 1
    assert h.engines.calls == []
    backends.monitors["b"].waiting = 0  # a probe sees b's queue drain
    backends.on_free()
    sent = await asyncio.wait_for(waiting, 30)
    assert sent.status == 200
    assert sent.headers["x-overspill-route"] == "local/b"
    assert h.engines.calls == ["b"]
    assert h.cloud.received == []
    assert sent.record.queued_s is not None  # it waited, and the log says so


async def test_cloud_answers_are_charged_to_the_tenant_until_its_budget_closes_the_cloud() -> None:
    text = POLICY + '\n[[tenants]]\nname = "acme"\ncloud_budget_usd = 0.025\n'
    h = harness({"a": [status(502)], "b": [status(502)]}, text)
    acme = {"x-overspill-tenant": "acme"}
    routes = [(await h.send(ask(), acme)).headers.get("x-overspill-route") for _ in range(3)]
    assert routes == ["cloud/mini", "cloud/mini", "cloud/mini"]  # 0.02 < 0.025 before the third
    closed = await h.send(ask(), acme)  # the engines' breakers opened on the way: nothing left
    assert closed.status == 503
    assert "tenant 'acme' spent $0.0300 of its $0.025" in closed.json["error"]["message"]
    assert len(h.cloud.received) == 3
    assert h.pipeline.runtime.gate.spent(h.policy.tenants[0]) == pytest.approx(0.03)
    other = await h.send(ask())  # another caller is not held to acme's budget
    assert other.headers["x-overspill-route"] == "cloud/mini"


async def test_the_record_says_what_happened_for_the_log_and_the_metrics() -> None:
    h = harness({"a": [status(502)], "b": [status(502)]})
    sent = await h.send(ask(), {"x-overspill-tenant": "someone"})
    record = sent.record
    assert (record.route, record.privacy, record.priority) == (
        "cloud/mini",
        "public",
        "interactive",
    )
    assert (record.tenant, record.model, record.served_model) == ("someone", "m", "m")
    assert (record.tokens_in, record.tokens_out) == (3, 2)  # the answer's usage
    assert record.cache.startswith("bypass")  # no temperature: not cached by default
    assert record.error == ""
    assert record.queued_s is None  # it never waited
    # the engines' breakers open on this one's retries (5 failures in a row): nothing is left
    refused = await h.send(ask(), {"x-overspill-privacy": "restricted"})
    assert refused.status == 503
    assert refused.record.error == "no_backend_available"
    assert refused.record.route == ""
    assert refused.record.privacy == "restricted"


async def test_under_pressure_the_route_caps_max_tokens_and_the_answer_says_so() -> None:
    text = (
        POLICY.replace(
            'cloud = ["mini"]',
            'cloud = ["mini"]\noverflow = { max_waiting = 2 }\n[routes.degrade]\nmax_tokens = 16',
        )
        + '\n[priorities]\nclasses = [{ name = "interactive", max_wait_s = 0 }]\n'
    )
    h = harness({"a": [chat_answer("short")], "b": [chat_answer("short")]}, text)
    for monitor in h.pipeline.runtime.backends.monitors.values():
        monitor.waiting = 5  # no room anywhere, and restricted may not overflow
    sent = await h.send({**ask(), "max_tokens": 500}, {"x-overspill-privacy": "restricted"})
    assert sent.status == 200
    assert sent.headers["x-overspill-degraded"] == "max_tokens 500 -> 16"
    assert sent.record.degraded == "max_tokens 500 -> 16"
    assert [body["max_tokens"] for body in h.engines.bodies] == [16]
    assert h.cloud.received == []


EXPLAINED = (
    POLICY.replace('cloud = ["mini"]', 'cloud = ["mini"]\noverflow = { max_waiting = 3 }')
    + """
[priorities]
classes = [
  { name = "interactive", max_wait_s = 0 },
  { name = "batch", overflow = false, max_wait_s = 0 },
]

[[tenants]]
name = "acme"
cloud_budget_usd = 0.03
"""
)


def varied(rng: random.Random) -> tuple[dict[str, Any], dict[str, str], dict[str, tuple]]:
    """A request, its headers, and the load each engine shows (distinct queues: no ties)."""
    queues = rng.sample(range(8), 2)
    loads = {
        name: (rng.random() < 0.85, queue, rng.choice([None, 0.1, 0.95]))
        for name, queue in zip(("a", "b"), queues, strict=True)
    }
    headers = {
        name: value
        for name, value in (
            ("x-overspill-privacy", rng.choice(["", "public", "restricted"])),
            ("x-overspill-priority", rng.choice(["", "interactive", "batch"])),
            ("x-overspill-tenant", rng.choice(["", "acme", "someone"])),
        )
        if value
    }
    body = {**ask(f"question {rng.randrange(10**6)}"), "max_tokens": rng.choice([8, 64, 512])}
    return body, headers, loads


async def test_explain_says_what_the_live_path_then_does_for_generated_requests() -> None:
    """300 generated requests under varied load, health, privacy, priority and spend: the
    explanation given just before each is sent names the target it then goes to (or that it is
    refused), with the same first reason."""
    rng = random.Random(15)
    h = harness({"a": [chat_answer("a")], "b": [chat_answer("b")]}, EXPLAINED)
    monitors = h.pipeline.runtime.backends.monitors
    outcomes: Counter[str] = Counter()
    for case in range(300):
        body, headers, loads = varied(rng)
        for name, (healthy, queue, kv) in loads.items():
            monitor = monitors[name]
            monitor.healthy, monitor.waiting, monitor.kv_cache_usage = healthy, queue, kv
            monitor.error = None if healthy else "probe failed"
        request = parse_request("chat", orjson.dumps(body))
        explained = explanation(request, *await h.pipeline.explain(request, headers))
        sent = await h.send(body, headers)
        where = f"case {case}: {headers} {loads} -> {explained}"
        if explained["refused"]:
            assert sent.status == 503, where
            assert sent.record.route == "", where
            outcomes["refused"] += 1
            continue
        assert sent.headers["x-overspill-route"] == explained["targets"][0], where
        if explained["reasons"]:
            assert explained["reasons"][0].startswith(sent.headers["x-overspill-reason"]), where
        outcomes[explained["targets"][0]] += 1
    # the generator reached every outcome: both engines, the cloud, and refusals
    assert set(outcomes) == {"local/a", "local/b", "cloud/mini", "refused"}, outcomes
