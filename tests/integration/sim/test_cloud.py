"""The cloud personality: big capacity, a fixed network delay, a rate limit, and a request log."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.clients import send_raw
from tests.processes import Process, sim
from tests.waits import wait_until

CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}


@pytest.fixture(scope="module")
def cloud() -> Iterator[Process]:
    with sim(
        "--personality", "cloud", "--network-latency-ms", "150", "--decode-base-ms", "2"
    ) as process:
        yield process


def test_records_every_request_and_clears(cloud: Process) -> None:
    httpx.delete(cloud.url + "/_sim/requests")
    api = openai.OpenAI(base_url=cloud.url + "/v1", api_key="sk-test-abcd", max_retries=0)
    api.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "my secret is 42"}],
        extra_headers={"X-Request-ID": "r-1"},
    )
    with pytest.raises(openai.NotFoundError):
        api.chat.completions.create(model="gpt-5-nope", messages=[{"role": "user", "content": "x"}])
    log = httpx.get(cloud.url + "/_sim/requests").json()
    assert log["count"] == 2
    first = log["requests"][0]
    assert first["path"] == "/v1/chat/completions"
    assert first["body"]["messages"][0]["content"] == "my secret is 42"
    assert first["headers"]["x-request-id"] == "r-1"
    assert first["headers"]["authorization"] == "…abcd"  # never the whole key
    assert log["requests"][1]["body"]["model"] == "gpt-5-nope"
    httpx.delete(cloud.url + "/_sim/requests")
    assert httpx.get(cloud.url + "/_sim/requests").json()["count"] == 0


def test_network_latency_is_added_before_the_first_byte(cloud: Process) -> None:
    start = time.perf_counter()
    assert httpx.post(cloud.url + "/v1/chat/completions", json=CHAT).status_code == 200
    assert time.perf_counter() - start >= 0.15


def running(cloud: Process, count: int) -> dict[str, Any]:
    """The simulator's stats once `count` sequences run, else {}."""
    stats: dict[str, Any] = httpx.get(cloud.url + "/_sim/stats").json()
    return stats if stats["running"] == count else {}


def test_large_capacity_nobody_waits() -> None:
    """60 requests at once all run together, none queues: the engine's own counts, taken while
    every answer is still being written (each lasts ~100 s, far longer than the test)."""
    with sim(
        "--personality", "cloud", "--network-latency-ms", "0", "--decode-base-ms", "50"
    ) as cloud:
        body = {**CHAT, "max_tokens": 2000}
        connections = [send_raw(cloud.url, "/v1/chat/completions", body) for _ in range(60)]
        try:
            busy = wait_until(lambda: running(cloud, 60), "60 running")
            assert busy["waiting"] == 0
        finally:
            for connection in connections:
                connection.close()


def test_rate_limit_returns_429_with_retry_after() -> None:
    """A full bucket is admitted, then a 429 that says when to come back. At 6 a minute one
    request refills every 10 s: the loop outruns the refill unless a request takes seconds (a
    hang, not a slow machine). How the bucket refills is tests/unit/sim/test_limits.py's, on a fake
    clock."""
    with sim(
        "--personality",
        "cloud",
        "--rate-limit-rpm",
        "6",
        "--network-latency-ms",
        "0",
        "--decode-base-ms",
        "1",
    ) as cloud:
        passed = 0
        limited = httpx.post(cloud.url + "/v1/chat/completions", json=CHAT)
        while limited.status_code == 200 and passed < 60:
            passed += 1
            limited = httpx.post(cloud.url + "/v1/chat/completions", json=CHAT)
        assert passed >= 6  # the whole bucket (more only if a refill came in between)
        assert limited.status_code == 429
        assert limited.json()["error"]["code"] == "rate_limit_exceeded"
        assert 1 <= int(limited.headers["retry-after"]) <= 10  # at most one refill away


def test_vllm_personality_does_not_record_by_default() -> None:
    with sim("--model", "m") as engine:
        assert httpx.get(engine.url + "/_sim/requests").status_code == 404
