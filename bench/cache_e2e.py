"""The semantic cache through the real proxy (a section of bench/cache.py).

One fast vLLM-like simulator behind two proxies, identical but for `semantic` (on / off). At
concurrency 1, unique cacheable questions (every one a miss) alternate between the two: the
difference of their latencies is what the semantic lookup adds to a miss (embedding, search, and
storing the answer afterwards). Then, with the cache filled, the latency of an exact hit and of
a semantic hit, and at concurrency 64 the semantic hits served per second.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from proxy.children import Child, overspill_command, started

ENGINE = (
    "--decode-base-ms",
    "2",
    "--decode-per-seq-ms",
    "0.1",
    "--prefill-ms-per-token",
    "0.01",
    "--model",
    "m",
    "--max-seqs",
    "256",
)
SUBJECTS = [
    "rivers",
    "volcanoes",
    "tax returns",
    "sourdough",
    "TCP handshakes",
    "sorting",
    "glaciers",
    "invoices",
    "password resets",
    "vaccines",
    "compilers",
]


@dataclass(frozen=True)
class ProxyFigures:
    miss_p50_ms: dict[str, float]  # "semantic on" / "semantic off"
    miss_p99_ms: dict[str, float]
    exact_hit_p50_ms: float
    semantic_hit_p50_ms: float
    semantic_hits_per_s: float  # at concurrency 64
    hit_share: float  # of those c=64 lookups, the share that were semantic hits
    refereed_share: float  # ... and the share the reference model had to settle


def question(i: int) -> str:
    return f"Question {i}: what should I know about {SUBJECTS[i % len(SUBJECTS)]}?"


def body(content: str) -> dict[str, object]:
    return {
        "model": "m",
        "messages": [{"role": "user", "content": content}],
        "temperature": 0,
        "max_tokens": 8,
    }


@contextlib.contextmanager
def proxy(engine: str, semantic: bool) -> Iterator[Child]:
    config = (
        f'[[backends]]\nname = "local"\nkind = "vllm"\nurl = "{engine}"\n'
        '[server]\nlog_level = "warning"\n'
        # a hit's own cost: no engine work started beside the verifier's reading
        f"[cache]\nsemantic = {str(semantic).lower()}\nspeculate = false\n"
        "semantic_unkeyed = true\n"  # its requests give no key: the anonymous scope
    )
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "overspill.toml"
        path.write_text(config)
        with started(overspill_command("serve", "--config", str(path), "--port", "0")) as child:
            yield child


async def timed(session: aiohttp.ClientSession, url: str, content: str) -> tuple[float, str]:
    start = time.perf_counter()
    async with session.post(url + "/v1/chat/completions", json=body(content)) as response:
        await response.read()
        return time.perf_counter() - start, response.headers.get("x-overspill-cache", "")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def cache_status(session: aiohttp.ClientSession, url: str) -> dict[str, int]:
    async with session.get(url + "/admin/status") as response:
        cache: dict[str, int] = (await response.json())["cache"]
        return cache


async def wait_searchable(session: aiohttp.ClientSession, url: str, count: int) -> None:
    for _ in range(3000):
        cache = await cache_status(session, url)
        if cache["searchable"] >= count and cache["referee_ready"] is not False:
            return
        await asyncio.sleep(0.01)
    raise RuntimeError("the semantic layer did not fill")


async def misses(urls: dict[str, str], count: int) -> dict[str, list[float]]:
    seconds: dict[str, list[float]] = {name: [] for name in urls}
    async with aiohttp.ClientSession() as session:
        for url in urls.values():  # warm up: connections, and the embedding model
            await timed(session, url, "warm up")
        await wait_searchable(session, urls["semantic on"], 1)
        for i in range(count):
            for name, url in urls.items():
                latency, status = await timed(session, url, question(i))
                assert status == "miss", status
                seconds[name].append(latency)
    return seconds


async def hits(
    url: str, count: int, seconds: float
) -> tuple[list[float], list[float], float, float, float]:
    exact, semantic = [], []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        await wait_searchable(session, url, count)
        for i in range(min(count, 200)):
            exact.append((await timed(session, url, question(i)))[0])
            latency, status = await timed(
                session, url, question(i).replace("what should", "what do")
            )
            if status == "hit-semantic":
                semantic.append(latency)
        served, total = 0, 0
        end = time.perf_counter() + seconds
        rng = random.Random(7)

        async def client() -> None:
            nonlocal served, total
            while time.perf_counter() < end:
                paraphrase = question(rng.randrange(count)).replace("what should", "what must")
                _, status = await timed(session, url, paraphrase)
                total += 1
                served += status == "hit-semantic"

        refereed = (await cache_status(session, url))["refereed"]
        start = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(64)))
        rate = served / (time.perf_counter() - start)
        refereed = (await cache_status(session, url))["refereed"] - refereed
    return exact, semantic, rate, served / max(total, 1), refereed / max(total, 1)


def measure(count: int = 300, seconds: float = 10.0) -> ProxyFigures:
    with (
        started(overspill_command("sim", "--port", "0", *ENGINE)) as engine,
        proxy(engine.url, True) as on,
        proxy(engine.url, False) as off,
    ):
        urls = {"semantic on": on.url, "semantic off": off.url}
        missed = asyncio.run(misses(urls, count))
        exact, semantic, rate, share, refereed = asyncio.run(hits(on.url, count, seconds))
    return ProxyFigures(
        {name: pct(values, 0.5) for name, values in missed.items()},
        {name: pct(values, 0.99) for name, values in missed.items()},
        pct(exact, 0.5),
        pct(semantic, 0.5) if semantic else float("nan"),
        rate,
        share,
        refereed,
    )
