"""Automatic prefix caching is real: a shared long prefix is prefilled once.

Profile: prefill 0.5 ms per uncached token, so a ~1,000-token prompt costs ~0.5 s of prefill the
first time and only its uncached tail afterwards.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.processes import Process, sim

PROFILE = ("--decode-base-ms", "5", "--decode-per-seq-ms", "0.1",
           "--prefill-ms-per-token", "0.5", "--max-batched-tokens", "4096")  # fmt: skip
SYSTEM = "You are a helpful assistant for the travel desk. " * 100  # ~1,000 tokens


@pytest.fixture(scope="module")
def engine() -> Iterator[Process]:
    with sim("--model", "m", *PROFILE) as process:
        yield process


def counter(url: str, name: str) -> float:
    text = httpx.get(url + "/metrics").text
    match = re.search(rf"^{re.escape(name)}{{[^}}]*}} (\S+)$", text, re.MULTILINE)
    assert match
    return float(match.group(1))


def ttft(url: str, question: str) -> tuple[float, int]:
    """Time to the first streamed token, and the cached prompt tokens the engine reported."""
    body = {
        "model": "m",
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}],
        "max_tokens": 3,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    start = time.perf_counter()
    first = None
    cached = -1
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=30) as response:
        for line in response.iter_lines():
            if first is None and '"content":"' in line and '"content":""' not in line:
                first = time.perf_counter() - start
            if '"usage":{' in line:
                cached = int(re.search(r'"cached_tokens":(\d+)', line).group(1))  # type: ignore[union-attr]
    assert first is not None
    return first, cached


def test_second_request_with_shared_prefix_is_faster_and_hits(engine: Process) -> None:
    hits_before = counter(engine.url, "vllm:prefix_cache_hits_total")
    cold, cold_cached = ttft(engine.url, "Which trains go to Lyon?")
    warm, warm_cached = ttft(engine.url, "Which flights go to Oslo?")
    hits_after = counter(engine.url, "vllm:prefix_cache_hits_total")
    assert cold_cached == 0
    assert warm_cached >= 960  # every full 16-token block of the shared system prompt
    assert hits_after - hits_before == warm_cached
    assert cold > 0.4
    assert warm < cold / 3, f"cold {cold:.3f}s warm {warm:.3f}s"
    queries = counter(engine.url, "vllm:prefix_cache_queries_total")
    assert queries >= 2 * 1000
