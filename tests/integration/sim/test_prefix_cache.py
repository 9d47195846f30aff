"""Automatic prefix caching is real: a shared long prefix is prefilled once.

The engine's own counters say so: the second request sharing a ~1,000-token system prompt is
served those tokens from the cache (its usage and vllm:prefix_cache_hits) and prefills only its
uncached tail (prefill_tokens_computed in /_sim/stats). What that saves in time to first token is
the step time's business (prefill is charged per computed token: tests/unit/sim/test_engine.py, on a
fake clock); the time itself, with and without prefix reuse, is bench/prefix.py's to measure.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import orjson
import pytest

from tests.processes import Process, engine_flags, sim

PROFILE = engine_flags(
    decode_base_ms=5, decode_per_seq_ms=0.1, prefill_ms_per_token=0.5, max_batched_tokens=4096
)
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


def prefilled(url: str) -> int:
    """Prompt tokens the engine has computed (not found in its prefix cache) since it started."""
    return int(httpx.get(url + "/_sim/stats").json()["engines"]["m"]["prefill_tokens_computed"])


@dataclass(frozen=True)
class Prefill:
    prompt: int  # prompt tokens, as the usage reports them
    cached: int  # of which served from the prefix cache, as the usage reports them
    computed: int  # what the engine counted as prefilled for this request


def ask(url: str, question: str) -> Prefill:
    """One streamed request behind SYSTEM, and what its prefill cost."""
    body = {
        "model": "m",
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}],
        "max_tokens": 3,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    before = prefilled(url)
    usage = None
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=30) as response:
        for line in response.iter_lines():
            if line.startswith("data: {") and '"usage":{' in line:
                usage = orjson.loads(line.removeprefix("data: "))["usage"]
    assert usage is not None
    cached = int(usage["prompt_tokens_details"]["cached_tokens"])
    return Prefill(int(usage["prompt_tokens"]), cached, prefilled(url) - before)


def test_a_second_request_with_a_shared_prefix_prefills_only_its_tail(engine: Process) -> None:
    hits_before = counter(engine.url, "vllm:prefix_cache_hits_total")
    cold = ask(engine.url, "Which trains go to Lyon?")
    warm = ask(engine.url, "Which flights go to Oslo?")
    hits_after = counter(engine.url, "vllm:prefix_cache_hits_total")
    assert cold.cached == 0
    assert cold.computed == cold.prompt >= 1000  # the whole prompt, the first time
    assert warm.cached >= 960  # every full 16-token block of the shared system prompt
    assert hits_after - hits_before == warm.cached
    assert warm.computed == warm.prompt - warm.cached  # the uncached tail alone ...
    assert warm.computed < cold.computed / 10  # ... a small part of it
    queries = counter(engine.url, "vllm:prefix_cache_queries_total")
    assert queries >= 2 * 1000
