"""/metrics and the JSON log line through the real proxy: a known mix of requests (local, cloud,
cache hits, rate-limited, unknown model), then the Prometheus text parsed with prometheus_client's
parser and every counter checked against what was sent; one log line per request, with no prompt
text unless the policy asks, and never for a restricted request."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.mix import mixed_policy
from tests.processes import FAST_ENGINE, Process, proxy, sim
from tests.waits import wait_until

CLOUD = ("--personality", "cloud", "--decode-base-ms", "1", "--output-tokens", "8")
LOCAL, HITS, LIMITED, UNKNOWN, CLOUDED = 4, 3, 2, 2, 2


def policy(engine: str, cloud: str, log_prompts: bool) -> str:
    levels = '[privacy]\nlevels = [{ name = "public" }, { name = "restricted", cloud = "none" }]'
    return mixed_policy(engine, cloud, f"log_prompts = {str(log_prompts).lower()}", levels)


@pytest.fixture(scope="module")
def traffic() -> Iterator[tuple[Process, list[httpx.Response]]]:
    with (
        sim(*FAST_ENGINE, "--model", "m", "--output-tokens", "6") as engine,
        sim(*CLOUD) as cloud,
        proxy(policy(engine.url, cloud.url, False)) as p,
    ):
        sent = []
        url = p.url + "/v1/chat/completions"
        acme = {"x-overspill-tenant": "acme"}
        for i in range(LOCAL):  # temperature 1: not cacheable, each reaches the engine
            sent.append(httpx.post(url, headers=acme, json=chat(f"local {i}", temperature=1)))
        for _ in range(HITS + 1):  # one miss, then hits
            sent.append(httpx.post(url, headers=acme, json=chat("same question", temperature=0)))
        limited = {"x-overspill-tenant": "limited"}
        for _ in range(LIMITED + 1):  # a bucket of one: the first passes
            sent.append(httpx.post(url, headers=limited, json=chat("hi", temperature=1)))
        for _ in range(UNKNOWN):
            sent.append(httpx.post(url, json={**chat("x"), "model": "nope"}))
        for i in range(CLOUDED):
            sent.append(httpx.post(url, headers=acme, json={**chat(f"c {i}"), "model": "hosted"}))
        logged(p, sent)
        yield p, sent


def chat(text: str, **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": text}], "max_tokens": 6, **extra}


def samples(url: str, name: str) -> list[tuple[dict[str, str], float]]:
    text = httpx.get(url + "/metrics").text
    found = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                found.append((sample.labels, sample.value))
    return found


def total(url: str, name: str, **labels: str) -> float:
    return sum(
        v for have, v in samples(url, name) if all(have.get(k) == w for k, w in labels.items())
    )


def test_the_metrics_parse_and_count_every_request_by_decision(
    traffic: tuple[Process, list[httpx.Response]],
) -> None:
    p, sent = traffic
    statuses = [r.status_code for r in sent]
    assert statuses.count(429) == LIMITED
    assert statuses.count(404) == UNKNOWN
    url = p.url
    name = "overspill_requests_total"
    assert total(url, name) == len(sent)
    assert total(url, name, decision="local") == LOCAL + 1 + 1  # + the cache miss, + limited's
    assert total(url, name, decision="cache") == HITS
    assert total(url, name, decision="cloud", target="mini") == CLOUDED
    assert total(url, name, decision="refused", code="429", tenant="limited") == LIMITED
    assert total(url, name, decision="refused", code="404") == UNKNOWN
    assert total(url, name, decision="local", target="local", tenant="acme") == LOCAL + 1
    reasons = {labels["reason"] for labels, _ in samples(url, name)}
    assert "least outstanding" in reasons
    assert total(url, "overspill_rejected_requests_total", limit="requests_per_minute") == LIMITED


def test_latency_ttft_and_tokens_agree_with_the_answers(
    traffic: tuple[Process, list[httpx.Response]],
) -> None:
    p, sent = traffic
    served = [r for r in sent if r.status_code == 200]
    assert total(p.url, "overspill_request_seconds_count") == len(sent)
    assert total(p.url, "overspill_ttft_seconds_count") == len(served)
    computed = [r for r in served if r.headers["x-overspill-cache"] != "hit-exact"]
    tokens_out = sum(r.json()["usage"]["completion_tokens"] for r in computed)
    tokens_in = sum(r.json()["usage"]["prompt_tokens"] for r in computed)
    assert total(p.url, "overspill_tokens_total", direction="out") == tokens_out
    assert total(p.url, "overspill_tokens_total", direction="in") == tokens_in


def logged(p: Process, sent: list[httpx.Response]) -> None:
    """Wait for each request's log line: a request is counted and logged just after its
    answer is sent, so the client may see the answer first."""
    ids = {response.headers["x-request-id"] for response in sent}
    wait_until(
        lambda: ids <= {line["request_id"] for line in log_lines(p)}, "a log line for every request"
    )


def log_lines(p: Process) -> list[dict[str, Any]]:
    lines = []
    for line in p.output:
        with_json = line[line.find("{") :] if "{" in line else ""
        try:
            record = json.loads(with_json)
        except ValueError:
            continue
        if isinstance(record, dict) and "request_id" in record:
            lines.append(record)
    return lines


def test_one_json_line_per_request_with_its_decision_and_no_prompt(
    traffic: tuple[Process, list[httpx.Response]],
) -> None:
    p, sent = traffic
    lines = {line["request_id"]: line for line in log_lines(p)}
    for response in sent:
        line = lines[response.headers["x-request-id"]]
        assert line["status"] == response.status_code
        assert "prompt" not in line
        assert line["ms"] > 0
    local = lines[sent[0].headers["x-request-id"]]
    assert local["tenant"] == "acme"
    assert local["route"] == "local/local"
    assert local["model"] == "m"
    assert local["reasons"][0].startswith("least outstanding")
    assert local["tokens_out"] == sent[0].json()["usage"]["completion_tokens"]
    assert local["ttft_ms"] <= local["ms"]
    hit = lines[sent[LOCAL + 1].headers["x-request-id"]]
    assert hit["cache"] == "hit-exact"
    assert "tokens_out" not in hit  # nothing computed
    refused = lines[sent[LOCAL + HITS + 2].headers["x-request-id"]]
    assert refused["error"] == "rate_limit_exceeded"


def test_prompts_are_logged_only_when_asked_and_never_when_restricted() -> None:
    with (
        sim(*FAST_ENGINE, "--model", "m") as engine,
        sim(*CLOUD) as cloud,
        proxy(policy(engine.url, cloud.url, True)) as p,
    ):
        url = p.url + "/v1/chat/completions"
        public = httpx.post(url, json=chat("the public question"))
        secret = httpx.post(
            url, json=chat("the secret question"), headers={"x-overspill-privacy": "restricted"}
        )
        logged(p, [public, secret])
        lines = {line["request_id"]: line for line in log_lines(p)}
    assert lines[public.headers["x-request-id"]]["prompt"] == "the public question"
    assert "prompt" not in lines[secret.headers["x-request-id"]]
    assert not any("the secret question" in line for line in p.output)


def test_the_event_loops_lag_is_a_histogram_on_the_metrics(
    traffic: tuple[Process, list[httpx.Response]],
) -> None:
    p, _ = traffic
    name = "overspill_event_loop_lag_seconds_count"
    wait_until(lambda: total(p.url, name) >= 2, "two wake-ups of the lag monitor")
    buckets = samples(p.url, "overspill_event_loop_lag_seconds_bucket")
    assert {labels["le"] for labels, _ in buckets} >= {"0.001", "0.1", "+Inf"}
