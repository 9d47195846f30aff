"""Chaos: a local engine dies under load. Nothing non-streamed fails (retried elsewhere), streams
cut mid-way end with an SSE error event, the breaker opens within a second and closes again once
the engine is back. The cloud chain stays out of it (privacy is proven elsewhere)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest

from tests.processes import Process, backend_toml, proxy, sim

ENGINE = ("--model", "m", "--decode-base-ms", "10", "--prefill-ms-per-token", "0.01")
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 10}


def policy(a: str, b: str) -> str:
    return (
        """
[server]
probe_interval_s = 0.2
[timeouts]
connect_s = 0.5
[retry]
attempts = 2
initial_backoff_s = 0.05
[breaker]
consecutive_failures = 2
open_s = 1.0
half_open_probes = 1
"""
        + backend_toml("a", "vllm", a, {"m": "m"})
        + backend_toml("b", "vllm", b, {"m": "m"})
    )


@dataclass
class Load:
    url: str
    statuses: list[int] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as client:
            while not self.stop.is_set():
                self.statuses.append(client.post("/v1/chat/completions", json=BODY).status_code)


def stream_until_cut(url: str, lines: list[str]) -> None:
    body = {**BODY, "max_tokens": 600, "stream": True}  # ~6 s: running when the engine dies
    headers = {"X-Request-ID": "stream"}
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, headers=headers,
                      timeout=30) as response:  # fmt: skip
        lines.extend(line for line in response.iter_lines() if line)


def breaker_state(proxy_url: str, name: str) -> str:
    state: str = httpx.get(proxy_url + "/admin/status").json()["breakers"][name]["state"]
    return state


def wait_for(predicate: object, timeout: float) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if predicate():  # type: ignore[operator]
            return time.monotonic() - start
        time.sleep(0.02)
    raise AssertionError(f"not within {timeout}s")


@pytest.fixture
def stack() -> Iterator[tuple[Process, Process, Process]]:
    with sim(*ENGINE) as a, sim(*ENGINE) as b, proxy(policy(a.url, b.url)) as p:
        yield p, a, b


def test_an_engine_dies_under_load(stack: tuple[Process, Process, Process]) -> None:
    p, a, _ = stack
    loads = [Load(p.url) for _ in range(4)]
    threads = [threading.Thread(target=load.run) for load in loads]
    streams: list[list[str]] = [[] for _ in range(4)]
    stream_threads = [threading.Thread(target=stream_until_cut, args=(p.url, s)) for s in streams]
    for thread in (*threads, *stream_threads):
        thread.start()
    time.sleep(1.0)
    httpx.post(a.url + "/_sim/faults", json={"listener_down_s": 3})
    opened_after = wait_for(lambda: breaker_state(p.url, "a") == "open", timeout=2)
    time.sleep(4)  # the engine comes back after 3 s
    closed_after = wait_for(lambda: breaker_state(p.url, "a") == "closed", timeout=8)
    for load in loads:
        load.stop.set()
    for thread in (*threads, *stream_threads):
        thread.join(timeout=60)
    statuses = [s for load in loads for s in load.statuses]
    assert len(statuses) > 50
    assert set(statuses) == {200}, f"{statuses.count(200)} of {len(statuses)} succeeded"
    assert opened_after < 1.0
    assert closed_after < 8  # after the 3 s outage: open_s, then one good half-open probe
    cut = [lines for lines in streams if lines and lines[-1] != "data: [DONE]"]
    assert cut, "no stream was on the engine that died"
    for lines in cut:
        assert lines[-1].startswith('data: {"error"'), lines[-3:]
