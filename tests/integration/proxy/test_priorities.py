"""Priority classes and the waiting room through the real proxy: a batch flood waits in the
proxy (using only its share of the engine) while interactive requests keep the engine; a queue
past its class's acceptable wait answers 429 with Retry-After. Real processes: a vLLM-like
simulator behind the proxy, driven by httpx."""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Iterator

import httpx

from tests.processes import Process, backend_toml, engine_flags, proxy, sim
from tests.waits import eventually, held_async

# Two sequences at once, ~0.3 s per 10-token answer.
ENGINE = engine_flags(
    model="m",
    max_seqs=2,
    decode_base_ms=30,
    decode_per_seq_ms=0,
    prefill_ms_per_token=0.01,
    output_tokens=10,
)


def policy(engine: str, batch_wait_s: float = 20.0) -> str:
    return f"""
[server]
probe_interval_s = 0.2
[cache]
enabled = false
{backend_toml("local", "vllm", engine, {"m": "m"})}max_concurrency = 2
[[routes]]
model = "m"
[routes.overflow]
max_inflight_ratio = 1.0
[priorities]
default = "interactive"
aging_s = 60
classes = [
  {{ name = "interactive", max_wait_s = 20 }},
  {{ name = "batch", local_share = 0.5, overflow = false, max_wait_s = {batch_wait_s} }},
]
[[tenants]]
name = "nightly"
priority = "batch"
"""


@contextlib.contextmanager
def stack(batch_wait_s: float = 20.0) -> Iterator[Process]:
    with sim(*ENGINE) as engine, proxy(policy(engine.url, batch_wait_s)) as p:
        yield p


def body(text: str) -> dict[str, object]:
    return {"model": "m", "messages": [{"role": "user", "content": text}], "max_tokens": 10}


BATCH = {"x-overspill-tenant": "nightly"}
# Batch's share of the engine (one of its two sequences), taken for as long as a test holds
# this stream (5,000 tokens at 30 ms: 150 s; closed long before).
HOLD = {**body("batch, held"), "max_tokens": 5000, "stream": True}


async def waiting(client: httpx.AsyncClient, count: int) -> bool:
    """`count` requests wait in the proxy's waiting room."""
    routes = (await client.get("/admin/status")).json()["routes"]
    return bool(routes[0]["waiting"] == count)


def post(
    client: httpx.AsyncClient, text: str, headers: dict[str, str]
) -> asyncio.Task[httpx.Response]:
    return asyncio.create_task(
        client.post("/v1/chat/completions", json=body(text), headers=headers)
    )


def test_interactive_requests_keep_the_engine_while_a_batch_flood_waits() -> None:
    """Batch holds its share of the engine; a flood of batch requests waits in the proxy; the
    interactive requests sent meanwhile are answered while the flood still waits, none of it let
    in ahead of them. Then the share is freed and the flood is served. (Before: time limits on
    each side, under 1 s and over 2 s, which a slow machine could cross.)"""

    async def run(url: str) -> tuple[list[httpx.Response], list[httpx.Response]]:
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            async with held_async(client, HOLD, BATCH):
                flood = [post(client, f"batch {i}", BATCH) for i in range(10)]
                await eventually(lambda: waiting(client, 10), "the flood waits")
                urgent = []
                for i in range(4):
                    urgent.append(await post(client, f"urgent {i}", {}))
                    assert await waiting(client, 10)  # nobody of the flood got in meanwhile
            return await asyncio.gather(*flood), urgent

    with stack(batch_wait_s=600) as p:
        flood, urgent = asyncio.run(run(p.url))
    assert all(r.status_code == 200 for r in (*flood, *urgent)), [r.text for r in flood]
    assert {r.headers["x-overspill-priority"] for r in flood} == {"batch"}
    assert {r.headers["x-overspill-priority"] for r in urgent} == {"interactive"}
    assert {r.headers["x-overspill-route"] for r in (*flood, *urgent)} == {"local/local"}


def test_a_batch_tenant_cannot_declare_itself_interactive() -> None:
    with stack() as p:
        response = httpx.post(
            p.url + "/v1/chat/completions",
            json=body("x"),
            headers={"x-overspill-tenant": "nightly", "x-overspill-priority": "interactive"},
        )
        assert response.headers["x-overspill-priority"] == "batch"
        lowered = httpx.post(
            p.url + "/v1/chat/completions",
            json=body("x"),
            headers={"x-overspill-priority": "batch"},
        )
        assert lowered.headers["x-overspill-priority"] == "batch"  # lowering is always allowed


def test_an_unknown_priority_is_a_400() -> None:
    with stack() as p:
        response = httpx.post(
            p.url + "/v1/chat/completions", json={**body("x"), "metadata": {"priority": "urgent!!"}}
        )
        assert response.status_code == 400
        error = response.json()["error"]
        assert (error["code"], error["param"]) == ("unknown_priority", "metadata.priority")


def test_a_queue_past_its_acceptable_wait_answers_429_with_retry_after() -> None:
    """Batch waits at most 1 s. Three batch requests, one after another, give the queue a drain
    rate: with the held stream's start, four starts in at least 0.9 s (each answer takes ten
    30 ms steps), so at most ~4.4 a second. While batch's share is held, a flood of 20 comes:
    at most four can be predicted to get in within 1 s; the rest are refused at once, with a
    429 that says when to come back. Those let wait get in, or time out with a 503."""

    async def run(url: str) -> tuple[list[httpx.Response], int]:
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            for i in range(3):  # a drain rate to predict with
                assert (await post(client, f"warm {i}", BATCH)).status_code == 200
            async with held_async(client, HOLD, BATCH):
                flood = [post(client, f"b {i}", BATCH) for i in range(20)]

                async def decided() -> bool:
                    routes = (await client.get("/admin/status")).json()["routes"]
                    return sum(task.done() for task in flood) + routes[0]["waiting"] == 20

                await eventually(decided, "every request refused at once or waiting")
                refused_at_once = sum(t.done() and t.result().status_code == 429 for t in flood)
            return await asyncio.gather(*flood), refused_at_once

    with stack(batch_wait_s=1.0) as p:
        results, refused_at_once = asyncio.run(run(p.url))
    refused = [r for r in results if r.status_code == 429]
    assert len(refused) >= 16, [r.status_code for r in results]
    assert len(refused) == refused_at_once  # on arrival, not after waiting for the engine
    for response in refused:
        assert response.headers["x-overspill-limit"] == "max_wait_s"
        error = response.json()["error"]
        assert error["code"] == "queue_full"
        # Retry-After is the predicted wait beyond max_wait_s (the message rounds it)
        predicted = float(error["message"].split("predicted wait ")[1].split(" s")[0])
        retry = int(response.headers["retry-after"])
        assert retry >= 1
        assert abs(retry - max(1, math.ceil(predicted - 1.0))) <= 1
    others = [r for r in results if r.status_code != 429]
    assert {r.status_code for r in others} <= {200, 503}
    assert all(r.json()["error"]["code"] == "queue_timeout" for r in others if r.status_code == 503)
