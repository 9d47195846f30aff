"""Degrading instead of waiting or refusing, through the real proxy: under pressure a request
goes to the route's smaller model when its backend has room, or gets a capped max_tokens; the
answer says so, and is never cached as the answer to the request as asked."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import httpx

from tests.processes import Process, backend_toml, engine_flags, proxy, sim
from tests.waits import eventually, held_async, in_flight, queued, wait_until

# One sequence (~0.4 s an answer): while a stream holds it, any other request finds it saturated.
BIG = engine_flags(
    model="m",
    max_seqs=1,
    decode_base_ms=40,
    decode_per_seq_ms=0,
    prefill_ms_per_token=0.01,
    output_tokens=10,
)
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
    return {
        "model": "m",
        "messages": [{"role": "user", "content": text}],
        "temperature": 0,
        **extra,
    }


# A stream that keeps the big engine's only sequence busy for as long as a test holds it:
# 2,000 tokens at 40 ms a step would last 80 s.
HOLD = body("Hold the big engine.", max_tokens=2000, stream=True)


async def beside_a_held_stream(
    url: str, bodies: list[dict[str, object]]
) -> tuple[httpx.Headers, list[httpx.Response]]:
    """`bodies` sent while a stream holds the big engine (its headers, and their answers).

    They are under pressure by construction, not because they happened to arrive before a
    short answer ended: the stream is let go only once each of them has been answered or is
    waiting for the big engine in the proxy's waiting room."""
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        async with held_async(client, HOLD) as holding:
            pressed = [
                asyncio.create_task(client.post("/v1/chat/completions", json=b)) for b in bodies
            ]

            async def decided() -> bool:
                answered = sum(task.done() for task in pressed)
                return answered + await asyncio.to_thread(queued, url, "m") == len(bodies)

            await eventually(decided, "every request answered or waiting")
        return holding.headers, list(await asyncio.gather(*pressed))


def idle(url: str) -> None:
    """Wait until the proxy has nothing in flight at the big engine (the held stream is gone)."""
    wait_until(lambda: in_flight(url, "big") == 0, "the big engine free again")


def test_under_pressure_a_request_goes_to_the_smaller_model_and_is_not_cached() -> None:
    with stack('model = "m-small"') as p:
        first, pressed = asyncio.run(
            beside_a_held_stream(p.url, [body(f"question {i}") for i in (1, 2)])
        )
        assert first["x-overspill-route"] == "local/big"
        assert "x-overspill-degraded" not in first
        assert [r.status_code for r in pressed] == [200, 200]
        for response in pressed:
            assert response.headers["x-overspill-route"] == "local/small"
            assert response.headers["x-overspill-degraded"] == "model m -> m-small"
            assert response.json()["model"] == "m-small"
        idle(p.url)
        # alone, the same question gets the model it asked for: nothing was cached for it
        again = httpx.post(p.url + "/v1/chat/completions", json=body("question 1"), timeout=30)
        assert again.headers["x-overspill-route"] == "local/big"
        assert again.headers["x-overspill-cache"] == "miss"
        assert "x-overspill-degraded" not in again.headers
        # that answer, not degraded, was cached as usual
        cached = httpx.post(p.url + "/v1/chat/completions", json=body("question 1"), timeout=30)
        assert cached.headers["x-overspill-cache"] == "hit-exact"


def test_under_pressure_a_request_gets_a_capped_max_tokens() -> None:
    with stack("max_tokens = 3") as p:
        bodies = [body(f"long {i}", max_tokens=20) for i in (1, 2)]
        first, pressed = asyncio.run(beside_a_held_stream(p.url, bodies))
        assert "x-overspill-degraded" not in first  # it found room: its max_tokens as asked
        assert [r.status_code for r in pressed] == [200, 200]
        for response in pressed:
            assert response.headers["x-overspill-degraded"] == "max_tokens 20 -> 3"
            assert response.json()["usage"]["completion_tokens"] <= 3
            assert response.headers["x-overspill-route"] == "local/big"  # it waited its turn
