"""Prefix coalescing under a burst (part 2 of bench/prefix.py), and what both parts share: the
workload's prompts, the simulators and the proxy as child processes, the streaming client and
the engines' prefix-cache counters.

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
import re
import string
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import aiohttp
import orjson

from bench.report import table
from proxy.children import Child, overspill_command, started

MODEL = "m"
CHAT = "/v1/chat/completions"
SHOTS = 4  # few-shot exchanges in each shared prefix: 25-word questions, 75-word answers


# -- the workload ------------------------------------------------------------------------------


def words(rng: random.Random, count: int) -> str:
    """`count` pseudo-random lowercase words: one simulator token each, shared with no one."""
    return " ".join(
        "".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 8))) for _ in range(count)
    )


def shared_prefix(seed: int, tokens: int) -> list[dict[str, str]]:
    """A system prompt and few-shot exchanges, about `tokens` simulator tokens in all."""
    rng = random.Random(seed)
    messages = [{"role": "system", "content": words(rng, max(1, tokens - SHOTS * 100))}]
    for _ in range(SHOTS):
        messages.append({"role": "user", "content": words(rng, 25)})
        messages.append({"role": "assistant", "content": words(rng, 75)})
    return messages


def body(prefix: list[dict[str, str]], rng: random.Random, model: str, tokens: int) -> bytes:
    ask = {"role": "user", "content": words(rng, rng.randint(15, 30)) + "?"}
    return orjson.dumps(
        {
            "model": model,
            "messages": [*prefix, ask],
            "max_tokens": tokens,
            "temperature": 0.7,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    )


@dataclass(frozen=True)
class Arrival:
    at: float  # seconds after the start
    group: int
    body: bytes


# -- processes ---------------------------------------------------------------------------------


def sim_flags(args: argparse.Namespace) -> tuple[str, ...]:
    return (
        "--personality",
        "vllm",
        "--model",
        MODEL,
        "--kv-tokens",
        str(args.kv_tokens),
        "--max-seqs",
        str(args.max_seqs),
    )


def config(backends: Sequence[str], model: str, strategy: str, warm_wait_s: float) -> str:
    text = f"""
[server]
probe_interval_s = 0.25
log_level = "warning"
[cache]
enabled = false
[balancing]
strategy = "{strategy}"
warm_wait_s = {warm_wait_s}
"""
    for i, url in enumerate(backends):
        text += f'[[backends]]\nname = "{"abcdefgh"[i]}"\nkind = "vllm"\nurl = "{url}"\n'
        text += f'models = ["{model}"]\n'
    return text


@contextlib.contextmanager
def sims(count: int, flags: Sequence[str]) -> Iterator[list[Child]]:
    with contextlib.ExitStack() as stack:
        yield [
            stack.enter_context(started(overspill_command("sim", "--port", "0", *flags)))
            for _ in range(count)
        ]


@contextlib.contextmanager
def proxy(text: str, replicas: int) -> Iterator[Child]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "overspill.toml"
        path.write_text(text)
        with started(overspill_command("serve", "--config", str(path), "--port", "0")) as child:
            asyncio.run(_ready(child.url, replicas))
            yield child


async def _ready(url: str, replicas: int, limit: float = 20.0) -> None:
    """Until the proxy's probes have found every replica healthy."""
    async with aiohttp.ClientSession() as session:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            async with session.get(url + "/readyz") as response:
                if len((await response.json()).get("usable", [])) == replicas:
                    return
            await asyncio.sleep(0.1)
    raise TimeoutError(f"{url}: not every replica became usable in {limit:g}s")


# -- measuring ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    ttft: float | None  # None: an error, or no content before giving up
    backend: str
    group: int
    prompt: int = 0  # prompt tokens, from the usage chunk
    cached: int | None = None  # of which found in the prefix cache (if the engine says)


async def one(
    session: aiohttp.ClientSession, url: str, arrival: Arrival, give_up: float
) -> Outcome:
    start = time.perf_counter()
    headers = {"content-type": "application/json"}
    try:
        async with asyncio.timeout(give_up):
            async with session.post(url + CHAT, data=arrival.body, headers=headers) as response:
                backend = response.headers.get("x-overspill-route", "?").removeprefix("local/")
                first, usage = None, {}
                async for line in response.content:
                    if first is None and _has_content(line):
                        first = time.perf_counter() - start
                    elif b'"usage":{' in line:
                        usage = orjson.loads(line[6:])["usage"]
        ttft = first if response.status == 200 else None
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
        return Outcome(ttft, backend, arrival.group, usage.get("prompt_tokens", 0), cached)
    except (TimeoutError, aiohttp.ClientError):
        return Outcome(None, "gave up", arrival.group)


def _has_content(line: bytes) -> bool:
    if not line.startswith(b"data: {"):
        return False
    choices = orjson.loads(line[6:]).get("choices") or [{}]
    return bool((choices[0].get("delta") or {}).get("content"))


async def replay(url: str, arrivals: Sequence[Arrival], give_up: float) -> list[Outcome]:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        start = time.perf_counter()
        tasks = []
        for arrival in arrivals:
            await asyncio.sleep(max(0.0, start + arrival.at - time.perf_counter()))
            tasks.append(asyncio.create_task(one(session, url, arrival, give_up)))
        return list(await asyncio.gather(*tasks))


@dataclass(frozen=True)
class Counters:
    """Engine counters, in prompt tokens."""

    queries: int = 0
    hits: int = 0
    computed: int = 0  # prefill tokens computed before first tokens (after hits)

    def __add__(self, other: Counters) -> Counters:
        return Counters(
            self.queries + other.queries, self.hits + other.hits, self.computed + other.computed
        )

    def __sub__(self, other: Counters) -> Counters:
        return Counters(
            self.queries - other.queries, self.hits - other.hits, self.computed - other.computed
        )

    @property
    def hit_rate(self) -> float:
        return self.hits / self.queries if self.queries else 0.0


async def sim_counters(urls: Sequence[str]) -> Counters:
    total = Counters()
    async with aiohttp.ClientSession() as session:
        for url in urls:
            async with session.get(url + "/_sim/stats") as response:
                for engine in (await response.json())["engines"].values():
                    total += Counters(
                        engine["prefix_cache_queries"],
                        engine["prefix_cache_hits"],
                        engine["prefill_tokens_computed"],
                    )
    return total


async def engine_counters(url: str) -> Counters:
    """A real vLLM's /metrics: queried and cached prompt tokens (computed = the difference)."""
    async with aiohttp.ClientSession() as session, session.get(url + "/metrics") as response:
        text = await response.text()

    def metric(name: str) -> int:
        values = re.findall(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.MULTILINE)
        return int(sum(float(v) for v in values))

    queries = metric("vllm:prefix_cache_queries_total")
    hits = metric("vllm:prefix_cache_hits_total")
    return Counters(queries, hits, queries - hits)


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
