"""Degrading instead of waiting or refusing, through the real proxy: under pressure a request
goes to the route's smaller model when its backend has room, or gets a capped max_tokens; the
answer says so, and is never cached as the answer to the request as asked."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import httpx

from tests.processes import Process, backend_toml, proxy, sim

# One sequence, ~0.4 s an answer: a second request finds it saturated.
BIG = ("--model", "m", "--max-seqs", "1", "--decode-base-ms", "40", "--decode-per-seq-ms", "0",
       "--prefill-ms-per-token", "0.01", "--output-tokens", "10")  # fmt: skip
SMALL = ("--model", "m-small", "--decode-base-ms", "2", "--prefill-ms-per-token", "0.01")


def policy(big: str, small: str, degrade: str) -> str:
    return f"""
[server]
probe_interval_s = 0.2
[cache]
semantic = false
{backend_toml("big", "vllm", big, {"m": "m"})}max_concurrency = 1
{backend_toml("small", "vllm", small, {"m-small": "m-small"})}max_concurrency = 8
[[routes]]
model = "m"
[routes.overflow]
max_inflight_ratio = 1.0
[routes.degrade]
{degrade}
"""


@contextlib.contextmanager
def stack(degrade: str) -> Iterator[Process]:
    with sim(*BIG) as big, sim(*SMALL) as small, proxy(policy(big.url, small.url, degrade)) as p:
        yield p


def body(text: str, **extra: object) -> dict[str, object]:
    return {"model": "m", "messages": [{"role": "user", "content": text}], "temperature": 0,
            **extra}  # fmt: skip


async def together(url: str, bodies: list[dict[str, object]]) -> list[httpx.Response]:
    """The first request, then the others once it holds the big engine's only sequence."""
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        first = asyncio.create_task(client.post("/v1/chat/completions", json=bodies[0]))
        for _ in range(200):
            backends = (await client.get("/admin/status")).json()["backends"]
            if next(b for b in backends if b["name"] == "big")["in_flight"]:
                break
            await asyncio.sleep(0.005)
        rest = asyncio.gather(*(client.post("/v1/chat/completions", json=b) for b in bodies[1:]))
        return [await first, *await rest]


def test_under_pressure_a_request_goes_to_the_smaller_model_and_is_not_cached() -> None:
    with stack('model = "m-small"') as p:
        responses = asyncio.run(together(p.url, [body(f"question {i}") for i in range(3)]))
        assert [r.status_code for r in responses] == [200, 200, 200]
        first, *pressed = responses
        assert first.headers["x-overspill-route"] == "local/big"
        assert "x-overspill-degraded" not in first.headers
        for response in pressed:
            assert response.headers["x-overspill-route"] == "local/small"
            assert response.headers["x-overspill-degraded"] == "model m -> m-small"
            assert response.json()["model"] == "m-small"
        # alone, the same question gets the model it asked for: nothing was cached for it
        again = httpx.post(p.url + "/v1/chat/completions", json=body("question 1"), timeout=30)
        assert again.headers["x-overspill-route"] == "local/big"
        assert again.headers["x-overspill-cache"] == "miss"
        assert "x-overspill-degraded" not in again.headers
        # the first, not degraded, was cached as usual
        cached = httpx.post(p.url + "/v1/chat/completions", json=body("question 0"), timeout=30)
        assert cached.headers["x-overspill-cache"] == "hit-exact"


def test_under_pressure_a_request_gets_a_capped_max_tokens() -> None:
    with stack("max_tokens = 3") as p:
        bodies = [body(f"long {i}", max_tokens=20) for i in range(3)]
        responses = asyncio.run(together(p.url, bodies))
        assert [r.status_code for r in responses] == [200, 200, 200]
        first, *pressed = responses
        assert first.json()["usage"]["completion_tokens"] == 20
        assert "x-overspill-degraded" not in first.headers
        for response in pressed:
            assert response.headers["x-overspill-degraded"] == "max_tokens 20 -> 3"
            assert response.json()["usage"]["completion_tokens"] <= 3
            assert response.headers["x-overspill-route"] == "local/big"  # it waited its turn
