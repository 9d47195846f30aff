"""What a semantic-cache miss costs through the real proxy, with the cache already holding 0,
10,000 or 100,000 answers (issue 18: a miss must cost the same whatever the cache holds).

For each size, two proxies in front of one fast simulator, identical but for `semantic`: one
looks every request up in a cache preloaded with that many answers (the file a proxy saves and
reloads), the other has the exact layer only. The requests are temperature-0 questions nobody
asked before (templated across ten domains, disjoint from the stored ones), so nearly all are
semantic misses, as a new user's traffic would be.

- concurrency 1: the two proxies take turns, request by request; the difference of their p50s
  and of their CPU per request is what a miss adds;
- concurrency 64, for --seconds each: misses answered per second, and CPU per request;
- what the cache did: lookups settled by the reference model (the "referee"), semantic hits,
  whether the index had become approximate; the proxy's RSS, in MB per 10,000 entries;
- proof of what was measured: the engine received exactly the requests the proxies forwarded,
  and the cached proxy counted a miss for each (or a hit, reported).

    .venv/bin/python -m bench.cache_miss [--entries 0,10000,100000] [--seconds 15] [--requests 300]

The stored questions are embedded once with the serving encoder and kept under
~/.cache/overspill/bench (100,000 take a few minutes on 2 cores the first time).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import aiohttp

from bench.cache_e2e import pct
from bench.cache_miss_setup import (
    cache_status,
    engine_args,
    engine_requests,
    probe_record,
    proxy,
    ready,
    rss_mb,
    timed,
    write_cache,
)
from bench.loadgen import cpu_seconds
from bench.question_bank import split
from bench.report import RESULTS, plot_path, table
from proxy.children import Child, overspill_command, started

# --- the measurements ------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    entries: int
    p50_ms: tuple[float, float]  # (semantic, exact only), concurrency 1
    p99_ms: tuple[float, float]
    cpu_ms: tuple[float, float]  # per request, concurrency 1
    rate: tuple[float, float]  # requests/s at concurrency 64
    cpu64_ms: tuple[float, float]  # per request at concurrency 64
    misses: int  # of the cached proxy's requests (the others were semantic hits)
    requests: int
    refereed: float  # share of its lookups the reference model settled
    verified: float  # ... whose nearest candidate the answer verifier read
    read_twice: float  # ... which its first reading agreed on, so it read the other way too
    speculated: float  # ... whose engine work started while the verifier read
    engine_first: float  # ... whose engine answer began before the verdict (reading dropped)
    withdrawn: float  # ... whose engine work was withdrawn: the verifier agreed first
    approximate: bool
    rss_mb: tuple[float, float]

    @property
    def added_p50_ms(self) -> float:
        return self.p50_ms[0] - self.p50_ms[1]

    @property
    def added_cpu_ms(self) -> float:
        return self.cpu_ms[0] - self.cpu_ms[1]


async def alternate(
    urls: tuple[str, str], pids: tuple[int, int], asked: list[str]
) -> tuple[list[list[float]], list[float], dict[str, int]]:
    """Both proxies, request by request: latencies, CPU per request, the cached one's statuses."""
    latencies: list[list[float]] = [[], []]
    statuses: dict[str, int] = {}
    async with aiohttp.ClientSession() as session:
        before = [cpu_seconds(pid) for pid in pids]
        for text in asked:
            for side, url in enumerate(urls):
                seconds, status = await timed(session, url, text)
                latencies[side].append(seconds)
                if side == 0:
                    statuses[status] = statuses.get(status, 0) + 1
        cpu = [
            (cpu_seconds(pid) - start) / len(asked) for pid, start in zip(pids, before, strict=True)
        ]
    return latencies, cpu, statuses


async def flood(
    url: str, pid: int, asked: list[str], seconds: float, concurrency: int = 64
) -> tuple[float, float, dict[str, int]]:
    """Requests/s and CPU per request at `concurrency`, each request a question not yet asked."""
    questions = iter(asked)
    statuses: dict[str, int] = {}
    done = 0
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        end = time.perf_counter() + seconds

        async def client() -> None:
            nonlocal done
            for text in questions:
                if time.perf_counter() >= end:
                    return
                _, status = await timed(session, url, text)
                statuses[status] = statuses.get(status, 0) + 1
                done += 1

        cpu, start = cpu_seconds(pid), time.perf_counter()
        await asyncio.gather(*(client() for _ in range(concurrency)))
        elapsed = time.perf_counter() - start
        cpu = cpu_seconds(pid) - cpu
    if done and next(questions, None) is None:
        print(f"  ({url}: ran out of questions after {done:,})", file=sys.stderr)
    return done / elapsed, cpu / max(done, 1), statuses


async def measure_size(
    engine: str,
    cached: Child,
    plain: Child,
    entries: int,
    asked: list[str],
    args: argparse.Namespace,
) -> Row:
    urls = (cached.url, plain.url)
    pids = (cached.popen.pid, plain.popen.pid)
    one, rest = asked[: args.requests], asked[args.requests :]
    half = len(rest) // 2
    async with aiohttp.ClientSession() as session:
        await ready(session, cached.url, entries)
        await timed(session, plain.url, "How do I warm up a model?")
        status0 = await cache_status(session, cached.url)
        served0 = await engine_requests(session, engine)
    latencies, cpu, statuses = await alternate(urls, pids, one)
    rate_c, cpu64_c, flood_statuses = await flood(cached.url, pids[0], rest[:half], args.seconds)
    rate_p, cpu64_p, plain_statuses = await flood(plain.url, pids[1], rest[half:], args.seconds)
    for name, count in flood_statuses.items():
        statuses[name] = statuses.get(name, 0) + count
    requests, misses = sum(statuses.values()), statuses.get("miss", 0)
    plain_requests = len(one) + sum(plain_statuses.values())
    async with aiohttp.ClientSession() as session:
        status1 = await cache_status(session, cached.url)
        withdrawn = status1["withdrawn"] - status0["withdrawn"]
        # proof: the engine received exactly the cached proxy's misses, the requests it
        # withdrew for a verified hit (counted once the engine has aborted them) and every
        # request of the exact-only one (distinct questions: none coalesced)
        expected = misses + withdrawn + plain_requests
        served = await settled_count(session, engine, served0, expected)
    # ... and the cached proxy looked every request up
    lookups = sum(status1[k] - status0[k] for k in ("misses", "hits_semantic", "hits_exact"))
    assert lookups == requests, f"the cache counted {lookups} lookups for {requests} requests"
    assert served == expected, (
        f"engine: {served}, forwarded {misses}+{withdrawn} withdrawn+{plain_requests}"
    )
    refereed = (status1["refereed"] - status0["refereed"]) / max(lookups, 1)
    verified = (status1["verified"] - status0["verified"]) / max(lookups, 1)
    twice = [read_twice(status) for status in (status0, status1)]
    return Row(
        entries,
        (pct(latencies[0], 0.5), pct(latencies[1], 0.5)),
        (pct(latencies[0], 0.99), pct(latencies[1], 0.99)),
        (1000 * cpu[0], 1000 * cpu[1]),
        (rate_c, rate_p),
        (1000 * cpu64_c, 1000 * cpu64_p),
        misses,
        requests,
        refereed,
        verified,
        (twice[1] - twice[0]) / max(lookups, 1),
        (status1["speculated"] - status0["speculated"]) / max(lookups, 1),
        (status1["overtaken"] - status0["overtaken"]) / max(lookups, 1),
        withdrawn / max(lookups, 1),
        bool(status1.get("indexes_approximate")),
        (rss_mb(pids[0]), rss_mb(pids[1])),
    )


async def settled_count(
    session: aiohttp.ClientSession, engine: str, before: float, expected: int
) -> float:
    """The requests the engine finished since `before`, once they reach `expected` (an abort
    is counted at the engine's next step), or as they stand after a few seconds."""
    for _ in range(100):
        served = await engine_requests(session, engine) - before
        if served >= expected:
            return served
        await asyncio.sleep(0.05)
    return served


def run(args: argparse.Namespace) -> list[Row]:
    sizes = [int(n) for n in args.entries.split(",")]
    asked_count = args.requests + int(args.seconds * 500)  # 250/s for each proxy
    rows = []
    with (
        tempfile.TemporaryDirectory() as folder,
        started(overspill_command("sim", "--port", "0", *engine_args(args.decode_ms))) as engine,
    ):
        probe = probe_record(engine.url, Path(folder))
        for entries in sizes:
            stored, asked = split(entries, asked_count)
            path = Path(folder) / f"preloaded-{entries}.cache"
            write_cache(path, probe, stored)
            print(f"{entries:,} entries: measuring", flush=True)
            with (
                proxy(engine.url, True, path, args.speculate) as cached,
                proxy(engine.url, False) as plain,
            ):
                rows.append(
                    asyncio.run(measure_size(engine.url, cached, plain, entries, asked, args))
                )
            print(report([rows[-1]]), flush=True)
    return rows


def report(rows: list[Row]) -> str:
    headers = (
        "entries",
        "miss p50 ms",
        "exact-only p50",
        "added p50",
        "added p99",
        "CPU/miss ms",
        "exact-only CPU",
        "added CPU",
        "misses/s c=64",
        "exact-only req/s",
        "CPU/miss c=64",
        "refereed",
        "verified",
        "read twice",
        "speculated",
        "engine first",
        "withdrawn",
        "misses",
        "approximate",
        "RSS MB",
    )
    return table(
        headers,
        [
            (
                r.entries,
                r.p50_ms[0],
                r.p50_ms[1],
                r.added_p50_ms,
                r.p99_ms[0] - r.p99_ms[1],
                r.cpu_ms[0],
                r.cpu_ms[1],
                r.added_cpu_ms,
                r.rate[0],
                r.rate[1],
                r.cpu64_ms[0],
                f"{r.refereed:.1%}",
                f"{r.verified:.1%}",
                f"{r.read_twice:.1%}",
                f"{r.speculated:.1%}",
                f"{r.engine_first:.1%}",
                f"{r.withdrawn:.1%}",
                f"{r.misses}/{r.requests}",
                r.approximate,
                r.rss_mb[0],
            )
            for r in rows
        ],
    )


def plot(rows: list[Row], before: list[Row] | None) -> Path:
    """Added CPU and misses/s by cache size; a saved earlier run (`--before`) beside it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [("before", before), ("now", rows)] if before else [("", rows)]
    width = 0.8 / len(runs)
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for i, (name, run_rows) in enumerate(runs):
        at = [j + (i - (len(runs) - 1) / 2) * width for j in range(len(run_rows))]
        left.bar(at, [r.added_cpu_ms for r in run_rows], width, label=f"CPU {name}".strip())
        right.bar(at, [r.rate[0] for r in run_rows], width, label=f"semantic cache {name}".strip())
    ticks, labels = range(len(rows)), [f"{r.entries:,}" for r in rows]
    for (name, run_rows), style in zip(runs, ("s--", "o-"), strict=False):
        p50 = [r.added_p50_ms for r in run_rows]
        left.plot(ticks, p50, style, color="C3", label=f"p50 {name or 'added'}".strip())
    left.axhline(3, color="grey", linestyle=":", label="goal 3 ms")
    left.set(title="what a semantic miss adds (c=1)", xlabel="entries in the cache", ylabel="ms")
    right.plot(ticks, [r.rate[1] for r in rows], "o-", color="C3", label="exact layer only")
    right.axhline(300, color="grey", linestyle=":", label="goal 300/s")
    right.set(title="misses answered per second (c=64)", xlabel="entries in the cache")
    for axis in (left, right):
        axis.set_xticks(list(ticks), labels)
        axis.legend()
    figure.tight_layout()
    path = plot_path("cache_miss")
    figure.savefig(path, dpi=110)
    return path


def save(rows: list[Row]) -> Path:
    path = RESULTS / "cache_miss.json"
    path.write_text(json.dumps([asdict(row) for row in rows], indent=1))
    return path


def read_twice(status: dict[str, Any]) -> int:
    """The answer verifier's verdicts that took both readings (0 without a verifier)."""
    verdicts = status.get("verifier_verdicts")
    return int(verdicts.get("both_ways", 0)) if isinstance(verdicts, dict) else 0


def load(path: Path) -> list[Row]:
    rows = []
    for saved in json.loads(path.read_text()):
        values: dict[str, Any] = {
            "verified": 0.0,
            "read_twice": 0.0,  # runs saved before these were measured
            "speculated": 0.0,
            "engine_first": 0.0,
            "withdrawn": 0.0,
            **{k: tuple(v) if isinstance(v, list) else v for k, v in saved.items()},
        }
        rows.append(Row(**{f.name: values[f.name] for f in dataclasses.fields(Row)}))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", default="0,10000,100000")
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--requests", type=int, default=300, help="at concurrency 1")
    parser.add_argument("--before", type=Path, help="a saved run (cache_miss.json) to plot beside")
    parser.add_argument(
        "--speculate",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the cached proxy's [cache] speculate (the default: on)",
    )
    parser.add_argument(
        "--decode-ms", type=float, default=1.0, help="the simulator's time per decode step"
    )
    args = parser.parse_args(argv)
    before = load(args.before) if args.before else None
    rows = run(args)
    if before:
        print("before:\n" + report(before) + "\nnow:")
    print(report(rows))
    print(f"rows: {save(rows)}\nplot: {plot(rows, before)}")
    mb = [(r.rss_mb[0] - rows[0].rss_mb[0]) / (r.entries / 10_000) for r in rows if r.entries]
    if mb:
        print(f"RSS: {statistics.median(mb):.1f} MB per 10,000 entries over the first row")
    return 0


if __name__ == "__main__":
    sys.exit(main())
