"""What both parts of bench/prefix.py share: the workload's prompts (few-shot prefixes shared
by groups of requests), the simulators and the proxy as child processes, the streaming client
that replays arrivals and times first tokens, and the engines' prefix-cache counters (the
simulator's stats, a real vLLM's /metrics)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import re
import string
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import orjson

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
