"""Prefix coalescing under a burst (part 2 of bench/prefix.py; what both parts share is in
bench/prefix_workload.py).

A burst of --burst requests (16) sharing a new ~2k-token prefix, all sent at once through the
proxy with strategy "prefix", warm_wait_s 0 (coalescing off, the default) and 2.0 (on), against
fresh simulators (--burst-replicas, 4) each time: the burst's own prefill (prompt - cached tokens
from each answer's usage), all prefill the replicas computed, TTFT p50/p99 and where the requests
landed. On idle replicas, and on busy ones (other requests with new ~1.5k-token prompts arriving
at --background-rate per replica, and four sequences decoding long answers, sent to the replicas
directly). --trials bursts per mode (3), each with its own prefix, on fresh replicas, pooled.

Why idle and busy. An engine prefills a prefix once per scheduler step that admits requests for
it. On an idle replica the first request starts a step at once, the others arrive during its
prefill and find the blocks cached when it ends: an idle replica de-duplicates a burst by itself.
A busy replica is in the middle of a step (often a long one, prefilling other work) when the
burst arrives: all that arrives before the step ends is admitted in the next one together, and
each request prefills the whole prefix. Coalescing is for that case: one request per replica
leads, the others wait for its first token.

Against a real vLLM (`--parts engine`, see bench/prefix.py): one replica, a ~1,500-token prefix
(its max_model_len is 2,048), 8-token answers, new prefixes every time so each starts cold;
counters from its /metrics (prefill computed = queried - cached prompt tokens).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, replace

import aiohttp
import orjson

from bench.prefix_workload import (
    MODEL,
    SHOTS,
    Arrival,
    Counters,
    Outcome,
    body,
    config,
    engine_counters,
    one,
    proxy,
    replay,
    shared_prefix,
    sim_counters,
    sim_flags,
    sims,
    words,
)
from bench.report import table
from proxy.children import overspill_command, started


@dataclass(frozen=True)
class Run:
    label: str
    outcomes: list[Outcome]
    counters: Counters
    second_half: Counters
    per_trial: tuple[int | None, ...] = ()  # part 2: each burst's own prefill

    def pct(self, q: float) -> float:
        values = sorted(o.ttft if o.ttft is not None else float("inf") for o in self.outcomes)
        return values[min(len(values) - 1, int(q * len(values)))]

    @property
    def errors(self) -> int:
        return sum(1 for o in self.outcomes if o.ttft is None)

    def landed(self) -> str:
        counts = Counter(o.backend for o in self.outcomes)
        return " ".join(f"{name}:{n}" for name, n in sorted(counts.items()))

    def replicas_per_group(self) -> float:
        served: dict[int, set[str]] = {}
        for o in self.outcomes:
            served.setdefault(o.group, set()).add(o.backend)
        return sum(len(s) for s in served.values()) / len(served)

    def landed_per_trial(self, size: int) -> str:
        """How many requests each replica got, busiest first, for each burst of `size`."""
        bursts = [self.outcomes[i : i + size] for i in range(0, len(self.outcomes), size)]
        counts = [sorted(Counter(o.backend for o in b).values(), reverse=True) for b in bursts]
        return " | ".join("/".join(map(str, c)) for c in counts)


def _own_prefill(outcomes: Sequence[Outcome]) -> int | None:
    """Prompt tokens these requests computed (not cached), when the engine reports cached tokens
    in `usage` (the simulator does; vLLM only with --enable-prompt-tokens-details)."""
    if any(o.cached is None for o in outcomes):
        return None
    return sum(o.prompt - (o.cached or 0) for o in outcomes)


# -- part 2: coalescing ------------------------------------------------------------------------


def burst_bodies(seed: int, tokens: int, count: int, model: str, answer: int) -> list[Arrival]:
    prefix = shared_prefix(seed, tokens)
    rng = random.Random(seed)
    return [Arrival(0.0, 0, body(prefix, rng, model, answer)) for _ in range(count)]


@dataclass(frozen=True)
class Background:
    """Other work on every replica while the burst arrives, sent to the replicas directly."""

    model: str
    rate: float = 0.0  # unrelated requests per second, each with its own new prompt
    prompt: int = 1500  # their prompt length (words)
    decoding: int = 0  # sequences decoding long answers all along
    seed: int = 0

    @property
    def idle(self) -> bool:
        return self.rate == 0 and self.decoding == 0


async def burst(
    proxy_url: str,
    engines: Sequence[str],
    arrivals: Sequence[Arrival],
    counters: Callable[[], Awaitable[Counters]],
    background: Background,
    give_up: float,
) -> tuple[list[Outcome], Counters]:
    """The burst through the proxy while `background` runs; the counters' change meanwhile."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        busy = [
            asyncio.create_task(_other_work(session, url, background, i, give_up))
            for i, url in enumerate(engines)
        ]
        if not background.idle:
            await asyncio.sleep(2.0)  # in full swing
        before = await counters()
        outcomes = await replay(proxy_url, arrivals, give_up)
        after = await counters()
        for task in busy:
            task.cancel()
        await asyncio.gather(*busy, return_exceptions=True)
    return outcomes, after - before


async def _other_work(
    session: aiohttp.ClientSession, url: str, background: Background, replica: int, give_up: float
) -> None:
    rng = random.Random(background.seed * 100 + replica)
    model = background.model
    long = orjson.dumps(
        {
            "model": model,
            "messages": [{"role": "user", "content": "Count."}],
            "max_tokens": 1000,
            "ignore_eos": True,
            "stream": True,
        }
    )
    tasks = [
        asyncio.create_task(one(session, url, Arrival(0, -1, long), give_up))
        for _ in range(background.decoding)
    ]
    try:
        while background.rate:
            prompt = [{"role": "user", "content": words(rng, background.prompt)}]
            other = Arrival(0, -1, body(prompt, rng, model, 16))
            tasks.append(asyncio.create_task(one(session, url, other, give_up)))
            await asyncio.sleep(rng.expovariate(background.rate))
        await asyncio.Event().wait()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def coalescing(args: argparse.Namespace, background: Background, warm_wait_s: float) -> Run:
    """--trials bursts (each its own prefix and background draws, fresh replicas), pooled."""
    trials = [
        _trial(args, replace(background, seed=k), warm_wait_s, args.seed + 7 + k)
        for k in range(args.trials)
    ]
    label = f"{'idle' if background.idle else 'busy'}, wait {warm_wait_s:g}s"
    counters = sum((c for _, c in trials), Counters())
    return Run(
        label,
        [o for t, _ in trials for o in t],
        counters,
        counters,
        tuple(_own_prefill(t) for t, _ in trials),
    )


def _trial(
    args: argparse.Namespace, background: Background, warm_wait_s: float, seed: int
) -> tuple[list[Outcome], Counters]:
    arrivals = burst_bodies(seed, args.burst_tokens, args.burst, MODEL, args.tokens)
    with sims(args.burst_replicas, sim_flags(args)) as fleet:
        urls = [s.url for s in fleet]
        with proxy(config(urls, MODEL, "prefix", warm_wait_s), len(urls)) as p:
            return asyncio.run(
                burst(p.url, urls, arrivals, lambda: sim_counters(urls), background, args.give_up)
            )


@contextlib.contextmanager
def real_engine(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    command = overspill_command("engine", "vllm", "--port", "0", "--max-model-len", "2048")
    with started(command, timeout=900) as child:
        yield child.url


def engine_coalescing(
    args: argparse.Namespace, url: str, decoding: int, warm_wait_s: float, seed: int
) -> Run:
    model = asyncio.run(_first_model(url))
    size = asyncio.run(_words_for(url, model, seed, args.engine_tokens))
    arrivals = burst_bodies(seed, size, args.burst, model, 8)
    with proxy(config([url], model, "prefix", warm_wait_s), 1) as p:
        busy = Background(model, decoding=decoding)
        outcomes, counters = asyncio.run(
            burst(p.url, [url], arrivals, lambda: engine_counters(url), busy, args.give_up)
        )
    label = f"vllm {'busy' if decoding else 'idle'}, wait {warm_wait_s:g}s"
    return Run(label, outcomes, counters, counters, (_own_prefill(outcomes),))


async def _first_model(url: str) -> str:
    async with aiohttp.ClientSession() as session, session.get(url + "/v1/models") as response:
        name: str = (await response.json())["data"][0]["id"]
        return name


async def _words_for(url: str, model: str, seed: int, tokens: int) -> int:
    """How many words make a prefix of about `tokens` real tokens (vLLM's /tokenize)."""
    size = tokens
    async with aiohttp.ClientSession() as session:
        for _ in range(3):
            payload = {"model": model, "messages": shared_prefix(seed, size)}
            async with session.post(url + "/tokenize", json=payload) as response:
                count = (await response.json())["count"]
            size = max(SHOTS * 100 + 1, round(size * tokens / count))
    return size


# -- report ------------------------------------------------------------------------------------


def burst_table(runs: Sequence[Run], size: int) -> str:
    return table(
        [
            "mode",
            "requests",
            "errors",
            "burst prompt tokens",
            "burst prefill computed",
            "per burst",
            "all prefill computed",
            "TTFT p50 s",
            "TTFT p99 s",
            "landed, per burst",
        ],
        [
            [
                r.label,
                len(r.outcomes),
                r.errors,
                sum(o.prompt for o in r.outcomes),
                _total(r.per_trial),
                " / ".join(_count(n) for n in r.per_trial),
                r.counters.computed,
                fmt_s(r.pct(0.5)),
                fmt_s(r.pct(0.99)),
                r.landed_per_trial(size),
            ]
            for r in runs
        ],
    )


def _total(values: Sequence[int | None]) -> str:
    return "?" if None in values else f"{sum(v or 0 for v in values):,}"


def _count(value: int | None) -> str:
    return "?" if value is None else f"{value:,}"


def fmt_s(value: float) -> str:
    return "never" if value == float("inf") else f"{value:.3f}"
