"""Overspill in front of a real vLLM server (CPU build, SmolLM2-135M-Instruct, float32).

The engine (tests/e2e/conftest.py) is started once with `overspill engine vllm` (the first run
installs it into its own environment and converts the weights: minutes), with --max-num-seqs 8.
Marked `real_engine`: `scripts/test -m "not real_engine"` skips it locally; CI runs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import openai
import pytest

from tests.e2e.conftest import MAX_NUM_SEQS
from tests.processes import Process, backend_toml, proxy, sim
from tests.waits import held, in_flight, route_of, status, wait_until

pytestmark = [pytest.mark.real_engine, pytest.mark.timeout(900)]

MODEL = "smollm2"
LONG_SYSTEM = (
    "You are a careful assistant for a railway company. You answer questions about timetables, "
    "tickets, refunds and accessibility. Always be polite, short and precise. "
) * 12  # ~500 real tokens: four full 128-token blocks at least


@pytest.fixture(scope="module")
def gateway(engine: Process) -> Iterator[Process]:
    config = "[server]\nprobe_interval_s = 0.2\n" + backend_toml("real", "vllm", engine.url)
    with proxy(config) as p:
        yield p


def client(p: Process) -> openai.OpenAI:
    return openai.OpenAI(base_url=p.url + "/v1", api_key="x", max_retries=0, timeout=120)


def metric(engine: Process, name: str) -> float:
    text = httpx.get(engine.url + "/metrics").text
    values = re.findall(rf"^{re.escape(name)}{{[^}}]*}} (\S+)$", text, re.MULTILINE)
    assert values, f"{name} not exported"
    return sum(float(v) for v in values)


def ask(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def test_chat_through_the_proxy_answers_and_keeps_usage(gateway: Process) -> None:
    api = client(gateway)
    reply = api.chat.completions.create(
        model=MODEL,
        messages=ask("What is the capital of France?"),
        max_tokens=20,
        temperature=0,  # type: ignore[arg-type]
    )
    assert "Paris" in (reply.choices[0].message.content or "")
    usage = reply.usage
    assert usage is not None
    assert usage.prompt_tokens > 5
    assert 1 <= usage.completion_tokens <= 20
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    chunks = list(
        api.chat.completions.create(
            model=MODEL,
            messages=ask("What is the capital of France?"),
            max_tokens=20,  # type: ignore[arg-type]
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == reply.choices[0].message.content
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == usage.completion_tokens


def test_completions_streamed_and_not(gateway: Process) -> None:
    api = client(gateway)
    whole = api.completions.create(model=MODEL, prompt="The sky is", max_tokens=8, temperature=0)
    assert whole.usage is not None
    assert whole.usage.completion_tokens == 8
    parts = list(
        api.completions.create(
            model=MODEL, prompt="The sky is", max_tokens=8, temperature=0, stream=True
        )
    )
    assert "".join(p.choices[0].text for p in parts if p.choices) == whole.choices[0].text


async def test_load_snapshot_comes_from_real_metrics(gateway: Process) -> None:
    """Twelve answers at once with --max-num-seqs 8: eight run, four wait, and the proxy's
    /admin/status shows it from the engine's own /metrics."""
    api = openai.AsyncOpenAI(base_url=gateway.url + "/v1", api_key="x", max_retries=0, timeout=120)
    burst = asyncio.gather(
        *(
            api.chat.completions.create(
                model=MODEL,
                messages=ask(f"Count to {i}"),
                # long enough that all eight still run when the last one starts, on a
                # machine whose other core is busy
                max_tokens=64,  # type: ignore[arg-type]
                extra_body={"ignore_eos": True},
            )
            for i in range(12)
        )
    )
    seen: list[dict[str, object]] = []
    async with httpx.AsyncClient(base_url=gateway.url) as http:
        while not burst.done() and len(seen) < 400:
            seen.append((await http.get("/admin/status")).json()["backends"][0]["load"])
            await asyncio.sleep(0.05)
    await burst
    await api.close()
    assert max(int(load["running"] or 0) for load in seen) == MAX_NUM_SEQS  # type: ignore[call-overload]
    assert max(int(load["waiting"] or 0) for load in seen) >= 1  # type: ignore[call-overload]
    assert max(float(load["kv_cache_usage"] or 0) for load in seen) > 0  # type: ignore[arg-type]


def long_stream(text: str) -> dict[str, object]:
    """A stream that outlasts most tests holding it: the engine generates for minutes (as many
    tokens as --max-model-len leaves room for). Only most: it ends when the engine is done, held
    or not (vLLM merges the events a client has not taken into fewer, larger ones, which the
    socket buffers absorb), so a test holding it checks that it is still in flight."""
    return {
        "model": MODEL,
        "messages": ask(text),
        "max_tokens": 1950,
        "stream": True,
        "ignore_eos": True,
    }


BACKENDS = ("real", "sim")
ROUNDS = 3  # a round is void when a held stream ends by itself: run again, so many times


@dataclass(frozen=True)
class Reading:
    """What the proxy's /admin/status says of both backends at one instant."""

    in_flight: dict[str, int]
    healthy: bool
    queued: bool  # an engine's own queue reads non-empty (vLLM's gauges trail its scheduler)

    @classmethod
    def now(cls, p: Process) -> Reading:
        backends = {b["name"]: b for b in status(p.url)["backends"]}
        return cls(
            {name: int(backends[name]["in_flight"]) for name in BACKENDS},
            all(backends[name]["healthy"] for name in BACKENDS),
            any((backends[name]["load"] or {}).get("waiting") for name in BACKENDS),
        )


class StreamEnded(Exception):
    """A held stream ended by itself (the engine was done) or a backend's probe failed: what
    the proxy did meanwhile proves nothing about balancing, so the round is void."""


def settled_at(p: Process, held: dict[str, int]) -> None:
    """Wait until the proxy counts no more than the `held` streams and reads no engine queue
    (the scores are then the held streams alone); StreamEnded unless they are exactly `held`."""

    def settled() -> Reading | None:
        reading = Reading.now(p)
        done = sum(reading.in_flight.values()) <= sum(held.values()) and not reading.queued
        return reading if done else None

    began = time.monotonic()
    reading = wait_until(settled, f"no more than {held} in flight, no queue read")
    assert reading is not None
    if reading.in_flight != held or not reading.healthy:
        waited = time.monotonic() - began
        raise StreamEnded(f"expected {held} held, read {reading} after {waited:.1f} s")


def route_while(p: Process, held: dict[str, int]) -> str:
    """Where one short request went (and why) while the backends held exactly `held` streams.

    The counts are read before it is sent and after it is done (a short request's count can
    trail its answer): a held stream is in flight from its routing to its end, so held at both
    readings it was held throughout."""
    settled_at(p, held)
    body = {"model": MODEL, "messages": ask("Say something"), "max_tokens": 4}
    response = httpx.post(p.url + "/v1/chat/completions", json=body, timeout=120)
    assert response.status_code == 200, response.text
    settled_at(p, held)
    return f"{route_of(response)} ({response.headers.get('x-overspill-reason', '')})"


def routes_while(p: Process, held: dict[str, int], requests: int) -> list[str]:
    return [route_while(p, held) for _ in range(requests)]


def held_route(p: Process, response: httpx.Response, held: dict[str, int]) -> str:
    """Where a newly held stream went; the `held` streams before it must still be in flight."""
    route = route_of(response)
    settled_at(p, {**held, route.removeprefix("local/"): held[route.removeprefix("local/")] + 1})
    return route


def balancing_round(p: Process) -> None:
    """One round of the test below; StreamEnded when it proves nothing."""
    with contextlib.ExitStack() as second:
        with held(p.url, long_stream("Tell a long story.")) as first:
            busy = held_route(p, first, dict.fromkeys(BACKENDS, 0))
            (free,) = {"local/real", "local/sim"} - {busy}
            one = {busy.removeprefix("local/"): 1, free.removeprefix("local/"): 0}
            routes = routes_while(p, one, 3)
            assert [r.split()[0] for r in routes] == [free] * 3, routes
            other = second.enter_context(held(p.url, long_stream("Another.")))
            assert held_route(p, other, one) == free
        name = busy.removeprefix("local/")
        wait_until(lambda: in_flight(p.url, name) == 0, f"{busy}'s stream closed")
        # the second stream is still held: requests go back to the first one's backend
        back = {name: 0, free.removeprefix("local/"): 1}
        routes = routes_while(p, back, 3)
        assert [r.split()[0] for r in routes] == [busy] * 3, routes


def test_least_outstanding_work_between_the_real_engine_and_a_simulator(
    engine: Process,
) -> None:
    """Each request goes to whichever backend holds fewer outstanding requests, the real
    engine's counted like the simulator's. Held streams make the counts: the first lands on
    either (an idle tie, broken at random) and everything sent meanwhile goes to the other; a
    second held stream goes to that other one; once the first is closed, requests go back to
    its backend. So each backend is in turn the busy one and the free one.

    The engine ends a held stream when it is done (minutes here, at one stream's pace), so each
    short request is evidence only when the counts read the same before and after it; a round
    in which a held stream ended by itself proves nothing and is run again (a misrouted request
    fails at once). Before, 24 requests from four workers had to leave at least 18 on the faster
    simulator: a share that depends on how fast this machine runs both (bench/ measures such
    things)."""
    slow = ("--decode-base-ms", "200", "--prefill-ms-per-token", "0.05")  # 1950 tokens: 6 min
    with sim("--model", MODEL, *slow) as simulator:
        config = (
            "[server]\nprobe_interval_s = 0.2\n"
            + backend_toml("real", "vllm", engine.url)
            + backend_toml("sim", "vllm", simulator.url)
        )
        with proxy(config) as p:
            void = []
            for _ in range(ROUNDS):
                try:
                    balancing_round(p)
                    return
                except StreamEnded as ended:
                    void.append(str(ended))
                wait_until(lambda: sum(Reading.now(p).in_flight.values()) == 0, "streams closed")
            pytest.fail(f"every round was void: {void}")


def test_client_disconnect_aborts_the_real_engines_request(
    engine: Process, gateway: Process
) -> None:
    """Asked for exactly 1,500 tokens (ignore_eos), the engine stops short of them once the
    client leaves: that is the abort, whatever the speed of this machine."""
    body = {
        "model": MODEL,
        "messages": ask("Write a very long story."),
        "max_tokens": 1500,
        "ignore_eos": True,
        "stream": True,
    }
    generated = metric(engine, "vllm:generation_tokens_total")
    running = "vllm:num_requests_running"
    with httpx.stream(
        "POST", gateway.url + "/v1/chat/completions", json=body, timeout=60
    ) as response:
        lines = response.iter_lines()  # kept referenced: dropping it would close the stream
        received = 0
        for line in lines:
            if line.startswith("data: {"):
                received += 1
            if received == 5:
                break
        # vLLM's gauges trail its scheduler: wait for the reading, do not expect it at once
        wait_until(lambda: metric(engine, running) == 1, "the engine is generating it")
    # Left alone, it would run to 1,500 tokens (minutes here): the bound only ends a hang.
    wait_until(lambda: metric(engine, running) == 0, "the engine stopped", timeout=600)
    assert metric(engine, "vllm:generation_tokens_total") - generated < 1500


def test_shared_prefix_through_the_proxy_hits_the_real_prefix_cache(
    gateway: Process, engine: Process
) -> None:
    api = client(gateway)
    before = metric(engine, "vllm:prefix_cache_hits_total")
    for question in ("When does the first train leave?", "Can I get a refund?"):
        system = {"role": "system", "content": LONG_SYSTEM}
        messages = [system, {"role": "user", "content": question}]
        api.chat.completions.create(model=MODEL, max_tokens=4, messages=messages)  # type: ignore[arg-type]
    hits = metric(engine, "vllm:prefix_cache_hits_total") - before
    assert hits >= 3 * 128, f"only {hits} prefix-cache hit tokens"
