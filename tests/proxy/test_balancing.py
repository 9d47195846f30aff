"""Least outstanding work, health and failover, with real simulators behind the proxy."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest

from tests.processes import Process, backend_toml, proxy, sim

FAST = ("--decode-base-ms", "2", "--decode-per-seq-ms", "0.1", "--prefill-ms-per-token", "0.01")
# Ten times slower per step: the same request holds a slot ten times longer.
SLOW = ("--decode-base-ms", "20", "--decode-per-seq-ms", "1", "--prefill-ms-per-token", "0.1")
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 20}


def config(*backends: tuple[str, Process]) -> str:
    head = "[server]\nprobe_interval_s = 0.2\n[timeouts]\nconnect_s = 0.5\n"
    return head + "".join(backend_toml(name, "vllm", p.url) for name, p in backends)


async def routes_of(url: str, requests: int, concurrency: int) -> Counter[str]:
    """Send `requests` requests, `concurrency` at a time; count where each was served."""
    routes: Counter[str] = Counter()
    queue = list(range(requests))

    async def worker(client: httpx.AsyncClient) -> None:
        while queue:
            queue.pop()
            response = await client.post("/v1/chat/completions", json=BODY)
            assert response.status_code == 200, response.text
            routes[response.headers["x-overspill-route"]] += 1

    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
    return routes


@pytest.fixture(scope="module")
def fast_and_slow() -> Iterator[Process]:
    with (
        sim("--model", "m", *FAST) as fast,
        sim("--model", "m", *SLOW) as slow,
        proxy(config(("fast", fast), ("slow", slow))) as p,
    ):
        yield p


async def test_most_traffic_goes_to_the_faster_backend(fast_and_slow: Process) -> None:
    """With 8 requests always in flight, each new one goes where fewest are outstanding.

    A request takes ~20 steps: ~50 ms on `fast`, ~450 ms on `slow`. Least outstanding work
    sends the next request to whichever holds fewer, so `slow` holds one or two at a time while
    `fast` turns over the rest: expected share of `fast` is about 90%; we require 75%.
    Round-robin would give 50%.
    """
    routes = await routes_of(fast_and_slow.url, requests=120, concurrency=8)
    assert sum(routes.values()) == 120
    assert routes["local/fast"] >= 0.75 * 120, routes
    assert routes["local/slow"] > 0, routes  # it is not starved either


async def test_ties_are_broken_at_random() -> None:
    """Idle, identical backends: one request at a time spreads over both, not the first."""
    with (
        sim("--model", "m", *FAST) as a,
        sim("--model", "m", *FAST) as b,
        proxy(config(("a", a), ("b", b))) as p,
    ):
        routes = await routes_of(p.url, requests=40, concurrency=1)
    assert routes["local/a"] >= 8, routes
    assert routes["local/b"] >= 8, routes


def status_of(proxy_url: str, name: str) -> dict[str, object]:
    backends = httpx.get(proxy_url + "/admin/status").json()["backends"]
    result: dict[str, object] = next(b for b in backends if b["name"] == name)
    return result


def wait_for(predicate: object, timeout: float = 5.0) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if predicate():  # type: ignore[operator]
            return time.monotonic() - start
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


@contextlib.contextmanager
def pair(probe_interval: float = 0.2) -> Iterator[tuple[Process, Process, Process]]:
    """Two identical engines `a` and `b` behind a proxy: (proxy, a, b)."""
    with sim("--model", "m", *FAST) as a, sim("--model", "m", *FAST) as b:
        text = config(("a", a), ("b", b)).replace("0.2", str(probe_interval), 1)
        with proxy(text) as p:
            yield p, a, b


def served_by(proxy_url: str, requests: int) -> Counter[str]:
    return Counter(
        httpx.post(proxy_url + "/v1/chat/completions", json=BODY).headers["x-overspill-route"]
        for _ in range(requests)
    )


def test_a_backend_that_stops_answering_is_skipped_and_used_again_when_back() -> None:
    with pair() as (p, _, b):
        httpx.post(b.url + "/_sim/faults", json={"listener_down_s": 3})
        wait_for(lambda: status_of(p.url, "b")["healthy"] is False)
        assert served_by(p.url, 20) == Counter({"local/a": 20})
        ready = httpx.get(p.url + "/readyz").json()
        assert ready["usable"] == ["a"]
        assert "b" in ready["down"]
        wait_for(lambda: status_of(p.url, "b")["healthy"] is True, timeout=8)
        assert served_by(p.url, 30)["local/b"] > 0


def test_a_connect_error_fails_over_before_the_probe_notices() -> None:
    """Probes every 10 s: the request that finds the backend gone is sent to the other one."""
    with pair(probe_interval=10) as (p, _, b):
        httpx.post(b.url + "/_sim/faults", json={"listener_down_s": 5})
        time.sleep(0.2)
        assert served_by(p.url, 10) == Counter({"local/a": 10})
        assert status_of(p.url, "b")["healthy"] is False


def test_every_backend_down_is_a_503_that_says_why() -> None:
    with sim("--model", "m", *FAST) as a, proxy(config(("a", a))) as p:
        httpx.post(a.url + "/_sim/faults", json={"listener_down_s": 3})
        wait_for(lambda: status_of(p.url, "a")["healthy"] is False)
        response = httpx.post(p.url + "/v1/chat/completions", json=BODY)
        assert response.status_code == 503
        error = response.json()["error"]
        assert error["code"] == "no_backend_available"
        assert "unhealthy: a" in error["message"]
        assert httpx.get(p.url + "/readyz").status_code == 503
