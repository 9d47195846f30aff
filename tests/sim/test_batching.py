"""Continuous batching is real: concurrency raises throughput up to --max-seqs, then requests queue.

Profile: decode step = 10 ms + 0.5 ms per running sequence, at most 8 running. One 64-token
answer alone takes about 64 x 10.5 ms; sixteen at once take about 2 x 64 x 14 ms (two waves of
eight), far under sixteen times one.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.processes import Process, sim

PROFILE = ("--decode-base-ms", "10", "--decode-per-seq-ms", "0.5",
           "--prefill-ms-per-token", "0.01", "--max-seqs", "8")  # fmt: skip


@pytest.fixture(scope="module")
def engine() -> Iterator[Process]:
    with sim("--model", "m", *PROFILE) as process:
        yield process


async def burst(url: str, concurrency: int, tokens: int) -> float:
    """Seconds for `concurrency` simultaneous requests of `tokens` output tokens each."""
    body = {"model": "m", "prompt": "go", "max_tokens": tokens, "temperature": 0}
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        start = time.perf_counter()
        replies = await asyncio.gather(
            *(client.post("/v1/completions", json=body) for _ in range(concurrency))
        )
        elapsed = time.perf_counter() - start
    assert all(r.json()["usage"]["completion_tokens"] == tokens for r in replies)
    return elapsed


def gauge(metrics: str, name: str) -> float:
    match = re.search(rf"^{re.escape(name)}{{[^}}]*}} (\S+)$", metrics, re.MULTILINE)
    assert match, f"{name} missing"
    return float(match.group(1))


async def test_sixteen_concurrent_take_far_less_than_sixteen_times_one(engine: Process) -> None:
    one = await burst(engine.url, 1, 64)
    sixteen = await burst(engine.url, 16, 64)
    assert one > 0.6  # 64 steps of >= 10.5 ms
    assert sixteen < 4 * one, f"one {one:.2f}s, sixteen {sixteen:.2f}s"


async def test_throughput_rises_until_max_seqs(engine: Process) -> None:
    throughput = {}
    for concurrency in (1, 4, 8, 16):
        seconds = await burst(engine.url, concurrency, 32)
        throughput[concurrency] = concurrency * 32 / seconds
    assert throughput[4] > 2.5 * throughput[1], throughput
    assert throughput[8] > 1.4 * throughput[4], throughput
    # Past max_seqs the extra requests queue: no more tokens per second.
    assert throughput[16] < 1.25 * throughput[8], throughput


async def test_queueing_past_max_seqs_shows_in_metrics(engine: Process) -> None:
    task = asyncio.create_task(burst(engine.url, 14, 40))
    await asyncio.sleep(0.2)
    async with httpx.AsyncClient(base_url=engine.url) as client:
        metrics = (await client.get("/metrics")).text
    await task
    assert gauge(metrics, "vllm:num_requests_running") == 8
    assert gauge(metrics, "vllm:num_requests_waiting") == 6
    assert gauge(metrics, "vllm:kv_cache_usage_perc") > 0
