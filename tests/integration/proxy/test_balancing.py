"""Least outstanding work, health and failover, with real simulators behind the proxy."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Iterator

import httpx

from tests.processes import Process, backend_toml, proxy, sim
from tests.waits import held, in_flight, route_of, wait_until

FAST = ("--decode-base-ms", "2", "--decode-per-seq-ms", "0.1", "--prefill-ms-per-token", "0.01")
# Slow enough that a held stream of 5,000 tokens outlasts any test holding it (50 s).
HOLDING = ("--decode-base-ms", "10", "--decode-per-seq-ms", "0.1", "--prefill-ms-per-token", "0.01")
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 20}
LONG = {
    "model": "m",
    "messages": [{"role": "user", "content": "a long story"}],
    "max_tokens": 5000,
    "stream": True,
}


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


def test_each_request_goes_where_fewest_are_outstanding() -> None:
    """Least outstanding work, with the outstanding counts made by held streams: the first
    lands on either idle backend (a tie), and everything sent meanwhile goes to the other; a
    second held stream goes to that other one; once the first is closed, requests go back to
    its backend. (Before, a share of at least 75% for the faster of two backends under a
    closed loop of 8: a figure of this machine's speed, which bench/ measures.)"""
    with (
        sim("--model", "m", *HOLDING) as a,
        sim("--model", "m", *HOLDING) as b,
        proxy(config(("a", a), ("b", b))) as p,
        contextlib.ExitStack() as second,
    ):
        with held(p.url, LONG) as first:
            busy = route_of(first)
            (free,) = {"local/a", "local/b"} - {busy}
            assert served_by(p.url, 5) == Counter({free: 5})
            assert route_of(second.enter_context(held(p.url, LONG))) == free
        name = busy.removeprefix("local/")
        wait_until(lambda: in_flight(p.url, name) == 0, f"{busy}'s stream closed")
        assert served_by(p.url, 5) == Counter({busy: 5})


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


def healthy(proxy_url: str, name: str) -> bool:
    return status_of(proxy_url, name)["healthy"] is True


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


def stop_listening(engine: Process) -> None:
    """The engine's listener closes, for longer than any test lasts; returns once a connection
    is refused (the fault takes effect just after its own answer)."""
    httpx.post(engine.url + "/_sim/faults", json={"listener_down_s": 600})
    wait_until(lambda: refused(engine.url), "the engine stopped listening")


def refused(url: str) -> bool:
    try:
        httpx.get(url + "/health", timeout=5)
    except httpx.ConnectError:
        return True
    except httpx.TransportError:  # accepted as the listener closed, then dropped: look again
        return False
    return False


def port_of(engine: Process) -> str:
    return engine.url.rsplit(":", 1)[1]


def test_a_backend_that_stops_answering_is_skipped_and_used_again_when_back() -> None:
    with pair() as (p, _, b):
        stop_listening(b)
        wait_until(lambda: not healthy(p.url, "b"), "the probe noticed b is down")
        assert served_by(p.url, 20) == Counter({"local/a": 20})
        ready = httpx.get(p.url + "/readyz").json()
        assert ready["usable"] == ["a"]
        assert "b" in ready["down"]
        # b is back: an engine answers at its address again (a restart, as it would be)
        with sim("--model", "m", *FAST, "--port", port_of(b)):
            wait_until(lambda: healthy(p.url, "b"), "the probe noticed b is back")
            assert served_by(p.url, 30)["local/b"] > 0


def test_a_connect_error_fails_over_before_the_probe_notices() -> None:
    """Probes every 10 s: the request that finds the backend gone is sent to the other one."""
    with pair(probe_interval=10) as (p, _, b):
        stop_listening(b)
        assert served_by(p.url, 10) == Counter({"local/a": 10})
        assert status_of(p.url, "b")["healthy"] is False


def test_every_backend_down_is_a_503_that_says_why() -> None:
    with sim("--model", "m", *FAST) as a, proxy(config(("a", a))) as p:
        stop_listening(a)
        wait_until(lambda: not healthy(p.url, "a"), "the probe noticed a is down")
        response = httpx.post(p.url + "/v1/chat/completions", json=BODY)
        assert response.status_code == 503
        error = response.json()["error"]
        assert error["code"] == "no_backend_available"
        assert "unhealthy: a" in error["message"]
        assert httpx.get(p.url + "/readyz").status_code == 503
