"""Prefix-aware routing and prefix coalescing, with real simulators behind the proxy.

Two vLLM-personality simulators serve the same model; each keeps its own prefix KV cache, so a
request whose system prompt one of them already prefilled is cheaper there. With
`[balancing] strategy = "prefix"` the proxy sends each group of requests sharing a system prompt
to the replica that holds it; with "round_robin" it alternates regardless. Prefix coalescing:
a burst sharing a prefix no replica holds prefills it once per replica, not once per request.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import httpx
import orjson
import pytest

from tests.processes import FAST_ENGINE, Process, backend_toml, proxy, sim
from tests.waits import eventually


def config(balancing: str, *backends: tuple[str, Process]) -> str:
    """A proxy in front of `backends`, the answer cache off (every request reaches an engine)."""
    head = "[server]\nprobe_interval_s = 0.2\n[timeouts]\nconnect_s = 0.5\n"
    head += "[cache]\nenabled = false\n"
    tables = "".join(backend_toml(name, "vllm", p.url) for name, p in backends)
    return head + tables + "\n[balancing]\n" + balancing


def system_prompt(topic: str, repeats: int) -> str:
    """A long system prompt no engine has seen: it starts with a fresh nonce."""
    line = f"You are the {topic} desk of a large company; answer briefly, cite the policy. "
    return f"[{uuid.uuid4().hex}] " + line * repeats


def body(system: str, question: str, stream: bool = False) -> dict[str, object]:
    return {
        "model": "m",
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": question}],
        "max_tokens": 4,
        "stream": stream,
    }


@pytest.fixture(scope="module")
def engines() -> Iterator[tuple[Process, Process]]:
    with sim("--model", "m", *FAST_ENGINE) as a, sim("--model", "m", *FAST_ENGINE) as b:
        yield a, b


async def interleaved(proxy_url: str) -> list[tuple[str, str, str]]:
    """12 requests of group A and 12 of group B (each group its own ~2,000-character system
    prompt, each request a unique question), one at a time in the order A B B A A B B A ...:
    (group, route, first reason) of each."""
    systems = {"A": system_prompt("travel", 26), "B": system_prompt("payroll", 26)}
    assert all(1900 < len(s) < 2300 for s in systems.values())
    order = [group for n in range(12) for group in ("AB" if n % 2 == 0 else "BA")]
    seen = []
    async with httpx.AsyncClient(base_url=proxy_url, timeout=30) as client:
        for n, group in enumerate(order):
            question = f"Question {n} of group {group}: what applies on day {n}?"
            response = await client.post(
                "/v1/chat/completions", json=body(systems[group], question)
            )
            assert response.status_code == 200, response.text
            headers = response.headers
            seen.append((group, headers["x-overspill-route"], headers["x-overspill-reason"]))
    return seen


async def test_each_group_sticks_to_the_replica_holding_its_prompt(
    engines: tuple[Process, Process],
) -> None:
    a, b = engines
    with proxy(config('strategy = "prefix"\n', ("a", a), ("b", b))) as p:
        seen = await interleaved(p.url)
    for group in "AB":
        routes = [route for g, route, _ in seen if g == group]
        reasons = [reason for g, _, reason in seen if g == group]
        assert len(routes) == 12
        assert len(set(routes)) == 1, (group, routes)
        holder = routes[0].removeprefix("local/")
        for reason in reasons[1:]:
            assert reason.startswith(f"prefix: {holder} holds "), (group, reason)


async def test_round_robin_alternates_regardless_of_prefix(
    engines: tuple[Process, Process],
) -> None:
    a, b = engines
    with proxy(config('strategy = "round_robin"\n', ("a", a), ("b", b))) as p:
        seen = await interleaved(p.url)
    routes = [route for _, route, _ in seen]
    assert all(x != y for x, y in itertools.pairwise(routes)), routes
    for _, route, reason in seen:
        assert reason == f"round robin: {route.removeprefix('local/')}"
    for group in "AB":
        assert {route for g, route, _ in seen if g == group} == {"local/a", "local/b"}


# --- prefix coalescing --------------------------------------------------------------------------

# Prefill at 0.5 ms per uncached token: the burst's ~960-token prefix takes ~0.5 s to prefill.
# Each engine is kept busy decoding one long answer, so a scheduler step lasts ~150 ms: a burst
# reaching an engine within one step is admitted together. vLLM V1 (and the simulator) key a
# block as soon as it is scheduled, so the engine itself prefills the prefix once per replica.
BUSY = ("--decode-base-ms", "150", "--decode-per-seq-ms", "0.1", "--prefill-ms-per-token", "0.5")


def prefill_computed(*sims: Process) -> int:
    """Prompt tokens the simulators' engines have actually prefilled (not found cached)."""
    stats = [httpx.get(s.url + "/_sim/stats").json()["engines"] for s in sims]
    return sum(int(e["prefill_tokens_computed"]) for engines in stats for e in engines.values())


def running(*sims: Process) -> int:
    return sum(int(httpx.get(s.url + "/_sim/stats").json()["running"]) for s in sims)


def async_running(count: int, *sims: Process) -> Callable[[], Awaitable[bool]]:
    """A condition for `eventually`: `count` sequences run on `sims` (read off the loop's thread,
    so the streams it drives go on meanwhile)."""

    async def reached() -> bool:
        return await asyncio.to_thread(running, *sims) == count

    return reached


@contextlib.asynccontextmanager
async def decoding(*sims: Process) -> AsyncIterator[None]:
    """Each simulator decodes one long answer (sent to it directly, not through the proxy)."""

    async def long_answer(url: str) -> None:
        payload = body("Tell a long story.", "Go on.", stream=True) | {"max_tokens": 5000}
        async with (
            httpx.AsyncClient(timeout=60) as client,
            client.stream("POST", url + "/v1/chat/completions", json=payload) as response,
        ):
            async for _ in response.aiter_raw():
                pass

    tasks = [asyncio.create_task(long_answer(s.url)) for s in sims]
    try:
        await eventually(async_running(len(sims), *sims), "each simulator decoding its answer")
        yield
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def answer_of(client: httpx.AsyncClient, payload: dict[str, object]) -> str:
    """The whole answer's text (streamed or not); fails unless it ended properly."""
    if not payload["stream"]:
        response = await client.post("/v1/chat/completions", json=payload)
        assert response.status_code == 200, response.text
        choice = response.json()["choices"][0]
        assert choice["finish_reason"] == "length"
        return str(choice["message"]["content"])
    text, finished, done = "", None, False
    async with client.stream("POST", "/v1/chat/completions", json=payload) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line == "data: [DONE]":
                done = True
            elif line.startswith("data: "):
                choice = orjson.loads(line[6:])["choices"][0]
                text += choice["delta"].get("content") or ""
                finished = choice.get("finish_reason") or finished
    assert done
    assert finished == "length"
    return text


async def burst(client: httpx.AsyncClient, system: str, size: int, stream: bool) -> list[str]:
    """`size` concurrent requests sharing `system`, each with its own question."""
    payloads = [body(system, f"Case {n}: is refund {n} allowed?", stream) for n in range(size)]
    return await asyncio.gather(*(answer_of(client, p) for p in payloads))


async def prefill_by_warm_wait(stream: bool) -> tuple[dict[int, int], dict[int, int]]:
    """A burst of 8 through a proxy with warm_wait_s = 0, then (a new prefix) with 2: the
    prompt tokens the two busy simulators prefilled, and the requests that waited for another
    one's prefill, for each."""
    computed, waited = {}, {}
    with sim("--model", "m", *BUSY) as a, sim("--model", "m", *BUSY) as b:
        async with decoding(a, b):
            for wait in (0, 2):
                with proxy(config(f"warm_wait_s = {wait}\n", ("a", a), ("b", b))) as p:
                    limits = httpx.Limits(max_connections=8)
                    async with httpx.AsyncClient(base_url=p.url, timeout=30, limits=limits) as c:
                        # Short prompts first: every connection is open when the burst comes.
                        await burst(c, "Be brief.", 8, stream)
                        before = prefill_computed(a, b)
                        system = system_prompt("support", 50)  # a new prefix: no engine holds it
                        assert 3900 < len(system) < 4300
                        answers = await burst(c, system, 8, stream)
                        computed[wait] = prefill_computed(a, b) - before
                        status = (await c.get("/admin/status")).json()
                        waited[wait] = status["balancing"]["waited_for_a_prefill"]
                assert len(answers) == 8
                assert all(answers), answers
    print(f"stream={stream}: prefill tokens computed {computed}, waited {waited}")
    return computed, waited


async def test_a_burst_sharing_a_new_prefix_is_prefilled_once_per_replica() -> None:
    """Eight requests arrive together with the same new ~960-token prefix: it is prefilled about
    once per replica used (two here), not eight times, with or without the proxy holding the
    followers; with warm_wait_s = 2 the followers of a streamed leader wait for its first
    token, and every request gets its whole answer."""
    computed, waited = await prefill_by_warm_wait(stream=True)
    for wait in (0, 2):
        assert computed[wait] < 3 * 1000, computed
    assert waited == {0: 0, 2: waited[2]}
    assert waited[2] >= 1


async def test_a_non_streamed_request_never_leads_a_prefill() -> None:
    """The proxy sees a whole answer only at its end, not at its first token: holding others
    for it would hold them for the whole answer. So nobody waits behind one."""
    computed, waited = await prefill_by_warm_wait(stream=False)
    assert waited == {0: 0, 2: 0}
    assert computed[2] < 3 * 1000, computed


def test_the_vllm_simulators_first_stream_chunk_comes_after_prefill() -> None:
    """What prefix coalescing relies on: a stream's first chunk marks the end of its prefill.
    When it arrives, the engine has prefilled the whole prompt (its own count, read then)."""
    with sim("--model", "m", "--prefill-ms-per-token", "0.5") as engine:
        payload = body("word " * 1000, "Go on.", stream=True)
        with httpx.stream("POST", engine.url + "/v1/chat/completions", json=payload) as response:
            first = next(response.iter_raw())
            counts = httpx.get(engine.url + "/_sim/stats").json()["engines"]["m"]
        assert first.startswith(b"data: ")
    assert counts["prompt_tokens"] > 1000
    assert counts["prefill_tokens_computed"] == counts["prompt_tokens"]
