"""What forwarding costs the proxy, before and after a change of the request path, in one run.

    .venv/bin/python -m bench.forwarding_cost [--before REV] [--requests 2000]

Two proxies, one per revision ("before": a git worktree of REV, default d5fc780, the last commit
before issue 15's refactor; "now": this tree), forward to the same zero-latency simulator with
the cache and coalescing off and every body distinct, so nothing but forwarding can answer.
Non-streamed and streamed chat completions (8 tokens), at concurrency 1 and 16, a fixed number
of requests per row, three rounds; which revision goes first alternates round by round so a
drift of the machine hits both, and each figure is the median of the rounds.
Measured: the proxy's CPU time per request (/proc), and latency p50/p99 as the client saw it.
Checked: the simulator received exactly the requests each row sent, all answered 200. Pinned on
2 cores: the proxy on core 1, the simulator and the client on core 0. Every process it starts
stops with it, and the worktree is removed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import httpx

from bench.loadgen import cpu_seconds
from bench.report import plot_path, table
from proxy.children import Child, overspill_command, started

ROOT = Path(__file__).resolve().parent.parent
MODEL = "m"
LEVELS = (1, 16)
CONFIG = """[server]
log_level = "warning"
[cache]
enabled = false
[[backends]]
name = "sim"
kind = "vllm"
url = "{url}"
models = ["m"]
"""


@dataclass(frozen=True)
class Row:
    revision: str
    stream: bool
    concurrency: int
    requests: int
    cpu_ms: float  # the proxy's CPU per request
    p50_ms: float
    p99_ms: float


@contextlib.contextmanager
def worktree(revision: str) -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="overspill-before-"))
    subprocess.run(
        ["git", "worktree", "add", "--detach", "--force", str(folder), revision],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    try:
        yield folder
    finally:
        subprocess.run(
            ["git", "worktree", "remove", "--force", str(folder)], cwd=ROOT, capture_output=True
        )


@contextlib.contextmanager
def proxy(code: Path, upstream: str) -> Iterator[Child]:
    """`overspill serve` from the code at `code` (its packages first on the path)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "overspill.toml"
        path.write_text(CONFIG.format(url=upstream))
        command = ["taskset", "-c", "1", *overspill_command("serve", "--config", str(path))]
        command += ["--port", "0"]
        env = {**os.environ, "PYTHONPATH": str(code)}
        with started(command, timeout=60, env=env, cwd=str(code)) as child:
            httpx.get(child.url + "/healthz", timeout=60).raise_for_status()
            yield child


def body(serial: int, stream: bool) -> bytes:
    """A body no other request shares: nothing could answer it but the engine."""
    payload = {
        "model": MODEL,
        "messages": [{"role": "user", "content": f"question {serial}"}],
        "max_tokens": 8,
        "temperature": 0,
        **({"stream": True} if stream else {}),
    }
    text = json.dumps(payload)
    return text.encode()


async def load(url: str, stream: bool, concurrency: int, requests: int, first: int) -> list[float]:
    """`requests` distinct requests over `concurrency` closed-loop connections: latencies (ms)."""
    serials = iter(range(first, first + requests))
    latencies: list[float] = []
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            for serial in serials:
                began = time.perf_counter()
                async with session.post(
                    url + "/v1/chat/completions",
                    data=body(serial, stream),
                    headers={"content-type": "application/json"},
                ) as response:
                    answer = await response.read()
                    if response.status != 200:
                        raise RuntimeError(f"{url} answered {response.status}: {answer[:500]!r}")
                latencies.append((time.perf_counter() - began) * 1000)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies


def received(sim: Child) -> int:
    stats = httpx.get(sim.url + "/_sim/stats").json()
    return sum(int(engine["requests"]) for engine in stats["engines"].values())


def measure(revision: str, child: Child, sim: Child, stream: bool, level: int, n: int) -> Row:
    first = received(sim)
    before = cpu_seconds(child.popen.pid)
    latencies = asyncio.run(load(child.url, stream, level, n, first * 10 + 7))
    cpu = cpu_seconds(child.popen.pid) - before
    sent = received(sim) - first
    if sent != n:  # the row measures forwarding only if every request reached the engine
        raise RuntimeError(f"{revision}: sent {n}, the simulator received {sent}")
    cuts = statistics.quantiles(latencies, n=100)
    return Row(revision, stream, level, n, cpu / n * 1000, statistics.median(latencies), cuts[98])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", default="d5fc780")
    parser.add_argument("--requests", type=int, default=2000, help="per row and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    zero = ("--decode-base-ms", "0", "--decode-per-seq-ms", "0", "--prefill-ms-per-token", "0")
    sim_command = ["taskset", "-c", "0", *overspill_command("sim", "--port", "0", "--model", MODEL)]
    rows: list[Row] = []
    with (
        worktree(args.before) as old,
        started([*sim_command, *zero]) as sim,
        proxy(old, sim.url) as before,
        proxy(ROOT, sim.url) as now,
    ):
        proxies = [(f"before ({args.before})", before), ("now", now)]
        for name, child in proxies:  # warm up each: imports, connections, caches
            measure(name, child, sim, False, 4, 500)
        for round_ in range(args.rounds):
            for stream in (False, True):
                for level in LEVELS:
                    # which one goes first alternates, round by round
                    for name, child in proxies[:: 1 if round_ % 2 == 0 else -1]:
                        row = measure(name, child, sim, stream, level, args.requests)
                        rows.append(row)
                        print(f"  round {round_}: {row}", file=sys.stderr)
    medians = median_rows(rows)
    print(report(medians))
    plot(medians)
    return 0


def median_rows(rows: list[Row]) -> list[Row]:
    """Per revision, kind of answer and concurrency: the median of the rounds."""
    keys = list(dict.fromkeys((r.revision, r.stream, r.concurrency) for r in rows))
    result = []
    for revision, stream, level in keys:
        same = [
            r for r in rows if (r.revision, r.stream, r.concurrency) == (revision, stream, level)
        ]
        result.append(
            Row(
                revision,
                stream,
                level,
                sum(r.requests for r in same),
                statistics.median(r.cpu_ms for r in same),
                statistics.median(r.p50_ms for r in same),
                statistics.median(r.p99_ms for r in same),
            )
        )
    return result


def report(rows: list[Row]) -> str:
    before = {(r.stream, r.concurrency): r for r in rows if r.revision != "now"}
    lines = [
        [
            r.revision,
            "stream" if r.stream else "whole",
            r.concurrency,
            r.requests,
            round(r.cpu_ms, 3),
            round(r.cpu_ms / before[(r.stream, r.concurrency)].cpu_ms, 2),
            round(r.p50_ms, 2),
            round(r.p99_ms, 2),
        ]
        for r in rows
    ]
    headers = ["revision", "answer", "conc.", "requests", "CPU ms/req", "vs before", "p50 ms"]
    return table([*headers, "p99 ms"], lines)


def plot(rows: list[Row]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def label(row: Row) -> str:
        return ("stream" if row.stream else "whole") + f" c{row.concurrency}"

    labels = sorted({label(r) for r in rows})
    revisions = sorted({r.revision for r in rows})
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.8 / len(revisions)
    for i, revision in enumerate(revisions):
        cpu = {label(r): r.cpu_ms for r in rows if r.revision == revision}
        xs = [x + i * width for x in range(len(labels))]
        ax.bar(xs, [cpu[name] for name in labels], width, label=revision)
    ax.set_xticks([x + width / 2 for x in range(len(labels))], labels)
    ax.set_ylabel("proxy CPU ms per forwarded request")
    ax.set_title("Forwarding cost, cache and coalescing off, distinct bodies")
    ax.legend()
    fig.tight_layout()
    fig.savefig(plot_path("forwarding_cost"))


if __name__ == "__main__":
    sys.exit(main())
