"""A client that goes away aborts its sequence at the next step, wherever it was waiting."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests import clients
from tests.processes import Process, sim

# Long prompts are prefilled in chunks of 256 tokens (~60 ms steps), so an abort lands quickly.
PROFILE = ("--decode-base-ms", "10", "--prefill-ms-per-token", "0.2",
           "--max-batched-tokens", "256", "--max-seqs", "1")  # fmt: skip


@pytest.fixture
def engine() -> Iterator[Process]:
    with sim("--model", "m", *PROFILE) as process:
        yield process


def stats(url: str) -> dict[str, Any]:
    result: dict[str, Any] = httpx.get(url + "/_sim/stats").json()
    return result


def wait_for(url: str, predicate: Any, timeout: float = 2.0) -> float:
    """Seconds until `predicate(stats)` holds."""
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if predicate(stats(url)):
            return time.perf_counter() - start
        time.sleep(0.01)
    raise AssertionError(f"not within {timeout}s: {stats(url)}")


def send_raw(url: str, body: dict[str, Any]) -> socket.socket:
    return clients.send_raw(url, "/v1/completions", body)


def test_disconnect_mid_stream_aborts(engine: Process) -> None:
    body = {"model": "m", "prompt": "x", "max_tokens": 1000, "stream": True}
    with httpx.stream("POST", engine.url + "/v1/completions", json=body) as response:
        lines = response.iter_lines()
        assert next(lines).startswith("data:")
        assert stats(engine.url)["running"] == 1
    took = wait_for(engine.url, lambda s: s["aborted"] == 1 and s["running"] == 0)
    assert took < 0.5
    assert stats(engine.url)["generation_tokens"] < 100


def test_disconnect_during_prefill_before_first_token_aborts(engine: Process) -> None:
    sock = send_raw(engine.url, {"model": "m", "prompt": "word " * 3000, "max_tokens": 5})
    wait_for(engine.url, lambda s: s["running"] == 1)
    sock.close()
    wait_for(engine.url, lambda s: s["aborted"] == 1 and s["running"] == 0, timeout=0.5)
    assert stats(engine.url)["generation_tokens"] == 0


def test_disconnect_while_queued_aborts_the_waiting_sequence(engine: Process) -> None:
    busy = send_raw(engine.url, {"model": "m", "prompt": "x", "max_tokens": 300})
    wait_for(engine.url, lambda s: s["running"] == 1)
    queued = send_raw(engine.url, {"model": "m", "prompt": "y", "max_tokens": 300})
    wait_for(engine.url, lambda s: s["waiting"] == 1)
    queued.close()
    wait_for(engine.url, lambda s: s["waiting"] == 0 and s["aborted"] == 1, timeout=0.5)
    busy.close()
    wait_for(engine.url, lambda s: s["aborted"] == 2 and s["running"] == 0, timeout=0.5)


def test_disconnect_during_injected_hang_is_counted(engine: Process) -> None:
    httpx.post(engine.url + "/_sim/faults", json={"hang_s": 30})
    sock = send_raw(engine.url, {"model": "m", "prompt": "x", "max_tokens": 3})
    time.sleep(0.2)
    sock.close()
    wait_for(engine.url, lambda s: s["disconnects"] == 1, timeout=0.5)
    assert stats(engine.url)["requests"] == 0  # it never reached the engine
