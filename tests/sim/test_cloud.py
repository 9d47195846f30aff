"""The cloud personality: big capacity, a fixed network delay, a rate limit, and a request log."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.processes import Process, sim

CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}


@pytest.fixture(scope="module")
def cloud() -> Iterator[Process]:
    with sim("--personality", "cloud", "--network-latency-ms", "150",
             "--decode-base-ms", "2") as process:  # fmt: skip
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


async def test_large_capacity_nobody_waits(cloud: Process) -> None:
    async with httpx.AsyncClient(base_url=cloud.url, timeout=30) as client:
        start = time.perf_counter()
        replies = await asyncio.gather(
            *(client.post("/v1/chat/completions", json={**CHAT, "max_tokens": 50})
              for _ in range(60))
        )  # fmt: skip
        elapsed = time.perf_counter() - start
    assert all(r.status_code == 200 for r in replies)
    # 60 in parallel: one network delay plus ~50 short steps, not 60 of them in a row.
    assert elapsed < 2.0


def test_rate_limit_returns_429_with_retry_after() -> None:
    with sim("--personality", "cloud", "--rate-limit-rpm", "120", "--network-latency-ms", "0",
             "--decode-base-ms", "1") as cloud:  # fmt: skip
        start = time.perf_counter()
        passed = 0
        limited = httpx.post(cloud.url + "/v1/chat/completions", json=CHAT)
        while limited.status_code == 200 and passed < 200:
            passed += 1
            limited = httpx.post(cloud.url + "/v1/chat/completions", json=CHAT)
        elapsed = time.perf_counter() - start
        # A full bucket of 120, plus what refilled (2 per second) while we were sending.
        assert 120 <= passed <= 120 + 2 * elapsed + 1
        assert limited.status_code == 429
        assert limited.json()["error"]["code"] == "rate_limit_exceeded"
        assert 1 <= int(limited.headers["retry-after"]) <= 2


def test_vllm_personality_does_not_record_by_default() -> None:
    with sim("--model", "m") as engine:
        assert httpx.get(engine.url + "/_sim/requests").status_code == 404
