"""Continuous batching is real: every scheduler step decodes one token for each running sequence,
up to --max-seqs of them; requests beyond that queue.

Counted by the engine itself (/_sim/stats and /metrics), not timed: what a step costs (10 ms +
0.5 ms per running sequence here) is tests/unit/sim/test_engine.py's to check on a fake clock, and
what that makes in tokens per second at concurrency 1, 4 and 16 is bench/calibration.py's.
"""

from __future__ import annotations

import contextlib
import re
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.clients import send_raw
from tests.processes import Process, sim
from tests.waits import wait_until

MAX_SEQS = 8
PROFILE = (
    "--decode-base-ms",
    "10",
    "--decode-per-seq-ms",
    "0.5",
    "--prefill-ms-per-token",
    "0.01",
    "--max-seqs",
    str(MAX_SEQS),
)
# 8,000 tokens at >= 10 ms a step: 80 s of decoding, so a request is still running whenever
# the test looks, however slow this machine is; the test ends it by closing its connection.
LONG_ANSWER = {"model": "m", "prompt": "go", "max_tokens": 8000, "temperature": 0}

Stats = dict[str, Any]


@pytest.fixture(scope="module")
def engine() -> Iterator[Process]:
    with sim("--model", "m", *PROFILE) as process:
        yield process


def stats(url: str) -> Stats:
    result: Stats = httpx.get(url + "/_sim/stats").json()
    return result


@contextlib.contextmanager
def in_flight(url: str, count: int) -> Iterator[None]:
    """`count` requests for long answers, all sent before the block runs and kept in flight for
    as long as it does; leaving closes their connections, which aborts them."""
    connections: list[socket.socket] = []
    try:
        connections += [send_raw(url, "/v1/completions", LONG_ANSWER) for _ in range(count)]
        yield
    finally:
        for connection in connections:
            connection.close()
        settled(url, running=0, waiting=0)  # the next test starts from an idle engine


def settled(url: str, running: int, waiting: int) -> None:
    """Wait until the engine runs `running` sequences and queues `waiting`."""

    def reached() -> bool:
        now = stats(url)
        return (now["running"], now["waiting"]) == (running, waiting)

    wait_until(reached, f"{running} running, {waiting} waiting")


def tokens_per_step(url: str, steps: int = 10) -> float:
    """Tokens the engine generated per scheduler step, over the next `steps` steps.

    Exact while the batch stays the same: the engine counts a step when it schedules it and its
    tokens when the step completes, and a stats request is served in between, so two readings
    differ by whole steps and the tokens of exactly those steps."""
    before = stats(url)["engines"]["m"]

    def later() -> Stats:
        now: Stats = stats(url)["engines"]["m"]
        return now if now["steps"] >= before["steps"] + steps else {}  # falsy: not yet

    after = wait_until(later, f"{steps} more steps")
    tokens = after["generation_tokens"] - before["generation_tokens"]
    return float(tokens / (after["steps"] - before["steps"]))


def gauge(metrics: str, name: str) -> float:
    match = re.search(rf"^{re.escape(name)}{{[^}}]*}} (\S+)$", metrics, re.MULTILINE)
    assert match, f"{name} missing"
    return float(match.group(1))


@pytest.mark.parametrize("concurrency", [1, 4, MAX_SEQS])
def test_a_step_decodes_every_running_sequence_at_once(engine: Process, concurrency: int) -> None:
    """Batching, not taking turns: n requests in flight make n tokens a step, not one."""
    with in_flight(engine.url, concurrency):
        settled(engine.url, running=concurrency, waiting=0)
        assert tokens_per_step(engine.url) == concurrency


def test_past_max_seqs_requests_queue_and_a_step_still_decodes_max_seqs(engine: Process) -> None:
    with in_flight(engine.url, 2 * MAX_SEQS):
        settled(engine.url, running=MAX_SEQS, waiting=MAX_SEQS)
        assert tokens_per_step(engine.url) == MAX_SEQS


def test_queueing_past_max_seqs_shows_in_metrics(engine: Process) -> None:
    with in_flight(engine.url, MAX_SEQS + 6):
        settled(engine.url, running=MAX_SEQS, waiting=6)
        metrics = httpx.get(engine.url + "/metrics").text
    assert gauge(metrics, "vllm:num_requests_running") == MAX_SEQS
    assert gauge(metrics, "vllm:num_requests_waiting") == 6
    assert gauge(metrics, "vllm:kv_cache_usage_perc") > 0
