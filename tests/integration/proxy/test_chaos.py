"""Chaos: a local engine dies under load. Nothing non-streamed fails (retried elsewhere), streams
cut mid-way end with an SSE error event, the breaker opens and closes again once the engine is
back. The cloud chain stays out of it (privacy is proven elsewhere). Every step waits for what
it needs to have happened (how fast is a matter for bench/, not for this test)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest

from tests.processes import Process, backend_toml, proxy, sim
from tests.waits import wait_until

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


@dataclass
class Stream:
    """A long stream read until it ends (or the test is over): its route and its lines."""

    url: str
    route: str = ""
    lines: list[str] = field(default_factory=list)
    started: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        body = {**BODY, "max_tokens": 5000, "stream": True}  # 50 s: running when the engine dies
        with httpx.stream(
            "POST", self.url + "/v1/chat/completions", json=body, timeout=30
        ) as response:
            self.route = response.headers["x-overspill-route"]
            self.started.set()
            for line in response.iter_lines():
                if line:
                    self.lines.append(line)
                if self.stop.is_set():
                    return


def breaker_state(proxy_url: str, name: str) -> str:
    state: str = httpx.get(proxy_url + "/admin/status").json()["breakers"][name]["state"]
    return state


def done(loads: list[Load]) -> int:
    return sum(len(load.statuses) for load in loads)


@pytest.fixture
def stack() -> Iterator[tuple[Process, Process, Process]]:
    with sim(*ENGINE) as a, sim(*ENGINE) as b, proxy(policy(a.url, b.url)) as p:
        yield p, a, b


def test_an_engine_dies_under_load(stack: tuple[Process, Process, Process]) -> None:
    p, a, _ = stack
    # Streams started one by one spread by least outstanding work: two on each engine.
    streams = [Stream(p.url) for _ in range(4)]
    loads = [Load(p.url) for _ in range(4)]
    threads = [threading.Thread(target=s.run) for s in streams]
    for stream, thread in zip(streams, threads, strict=True):
        thread.start()
        assert stream.started.wait(30)
    threads += [threading.Thread(target=load.run) for load in loads]
    for thread in threads[len(streams) :]:
        thread.start()
    wait_until(lambda: all(load.statuses for load in loads), "the load is flowing")
    httpx.post(a.url + "/_sim/faults", json={"listener_down_s": 3})
    wait_until(lambda: breaker_state(p.url, "a") != "closed", "the breaker opened")
    opened = done(loads)
    wait_until(lambda: done(loads) >= opened + 8, "requests served while a is down")
    wait_until(lambda: any("listener back" in line for line in a.output), "a listens again")
    wait_until(lambda: breaker_state(p.url, "a") == "closed", "the breaker closed again")
    closed = done(loads)
    wait_until(lambda: done(loads) >= closed + 8, "requests served once a is back")
    for worker in (*loads, *streams):
        worker.stop.set()
    for thread in threads:
        thread.join(timeout=60)
    statuses = [s for load in loads for s in load.statuses]
    assert set(statuses) == {200}, f"{statuses.count(200)} of {len(statuses)} succeeded"
    cut = [stream.lines for stream in streams if stream.route == "local/a"]
    assert len(cut) == 2, [stream.route for stream in streams]
    for lines in cut:
        assert lines[-1].startswith('data: {"error"'), lines[-3:]
