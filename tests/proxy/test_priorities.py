"""Priority classes and the waiting room through the real proxy: a batch flood waits in the
proxy (using only its share of the engine) while interactive requests keep the engine; a queue
past its class's acceptable wait answers 429 with Retry-After. Real processes: a vLLM-like
simulator behind the proxy, driven by httpx."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator

import httpx

from tests.processes import Process, backend_toml, proxy, sim

# Two sequences at once, ~0.3 s per 10-token answer.
ENGINE = ("--model", "m", "--max-seqs", "2", "--decode-base-ms", "30", "--decode-per-seq-ms", "0",
          "--prefill-ms-per-token", "0.01", "--output-tokens", "10")  # fmt: skip


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


async def timed(
    client: httpx.AsyncClient, text: str, headers: dict[str, str], delay: float = 0.0
) -> tuple[float, httpx.Response]:
    await asyncio.sleep(delay)
    started = time.monotonic()
    response = await client.post("/v1/chat/completions", json=body(text), headers=headers)
    return time.monotonic() - started, response


def test_interactive_requests_keep_the_engine_while_a_batch_flood_waits() -> None:
    batch = {"x-overspill-tenant": "nightly"}
    interactive: dict[str, str] = {}

    async def run(url: str) -> list[tuple[float, httpx.Response]]:
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            flood = [timed(client, f"batch {i}", batch) for i in range(10)]
            urgent = [timed(client, f"urgent {i}", interactive, 0.5 + 0.4 * i) for i in range(4)]
            return await asyncio.gather(*flood, *urgent)

    with stack() as p:
        results = asyncio.run(run(p.url))
    flood, urgent = results[:10], results[10:]
    assert all(r.status_code == 200 for _, r in results), [r.text for _, r in results]
    assert {r.headers["x-overspill-priority"] for _, r in flood} == {"batch"}
    assert {r.headers["x-overspill-priority"] for _, r in urgent} == {"interactive"}
    # Batch may use one of the two sequences: ten take ~3 s, one after the other. Interactive
    # requests find the other sequence free and never queue behind the flood.
    slowest_urgent = max(seconds for seconds, _ in urgent)
    slowest_batch = max(seconds for seconds, _ in flood)
    assert slowest_urgent < 1.0, [round(s, 2) for s, _ in urgent]
    assert slowest_batch > 2.0  # they really waited their turn, one by one


def test_a_batch_tenant_cannot_declare_itself_interactive() -> None:
    with stack() as p:
        response = httpx.post(p.url + "/v1/chat/completions", json=body("x"), headers={
            "x-overspill-tenant": "nightly", "x-overspill-priority": "interactive"})  # fmt: skip
        assert response.headers["x-overspill-priority"] == "batch"
        lowered = httpx.post(p.url + "/v1/chat/completions", json=body("x"),
                             headers={"x-overspill-priority": "batch"})  # fmt: skip
        assert lowered.headers["x-overspill-priority"] == "batch"  # lowering is always allowed


def test_an_unknown_priority_is_a_400() -> None:
    with stack() as p:
        response = httpx.post(p.url + "/v1/chat/completions",
                              json={**body("x"), "metadata": {"priority": "urgent!!"}})  # fmt: skip
        assert response.status_code == 400
        error = response.json()["error"]
        assert (error["code"], error["param"]) == ("unknown_priority", "metadata.priority")


def test_a_queue_past_its_acceptable_wait_answers_429_with_retry_after() -> None:
    """Batch waits at most 1 s; it drains at ~3 requests/s (one sequence, ~0.3 s each), so
    once the rate is known, a flood of 20 leaves most of them predicted past the limit."""
    batch = {"x-overspill-tenant": "nightly"}

    async def run(url: str) -> list[tuple[float, httpx.Response]]:
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            for i in range(3):  # a drain rate to predict with
                await timed(client, f"warm {i}", batch)
            return await asyncio.gather(*(timed(client, f"b {i}", batch) for i in range(20)))

    with stack(batch_wait_s=1.0) as p:
        results = asyncio.run(run(p.url))
    statuses = [r.status_code for _, r in results]
    assert statuses.count(200) >= 3
    refused = [r for _, r in results if r.status_code == 429]
    assert len(refused) >= 5, statuses
    for response in refused:
        assert response.headers["x-overspill-limit"] == "max_wait_s"
        assert 1 <= int(response.headers["retry-after"]) <= 10
        error = response.json()["error"]
        assert error["code"] == "queue_full"
        assert "predicted wait" in error["message"]
    assert all(seconds < 0.5 for seconds, r in results if r.status_code == 429)  # at once
    late = [r for _, r in results if r.status_code == 503]
    assert all(r.json()["error"]["code"] == "queue_timeout" for r in late)
