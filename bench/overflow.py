"""Overflow under load: local-only versus overflow-to-cloud, side by side in one run.

A vLLM-like simulator is the local capacity: 32 sequences at once, decode steps of 60 ms + 2 ms per
running sequence, 16-token answers (about 2 s of service each). A cloud simulator (large capacity,
150 ms network latency) is the overflow target. The route lets up to 1.75 x max_concurrency
requests in flight locally (--ratio) and a predicted TTFT up to 1.5 s (--slo). First the local
capacity C (requests/s) is measured. Then, for each mode and for 0.5C, 1C, 2C and 4C: Poisson
arrivals of streamed chat completions through the proxy for --warmup seconds (not measured, so
that queues are at their steady level) then --seconds measured. Reported per mode and load: TTFT
p50/p99, the share of requests meeting the 2 s TTFT SLO, and the share served by the cloud next
to the excess over C (1 - C/load). A client waits at most --give-up seconds for a first token
(else a miss). Prints a table, saves bench/results/overflow.png.

Why a 32-sequence engine: at load 1C, arrivals are random and the local queue is a random walk,
so some requests must go elsewhere to keep the SLO; how many falls as the queue the SLO allows
(C x the wait budget) grows. With a 4-sequence engine (C = 3.4 requests/s, room for about 6
queued requests) 13% went to the cloud at 1C; with 32 sequences (C ~ 15, room for ~24) none did.

    .venv/bin/python -m bench.overflow [--seconds 30]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from bench.report import plot_path, table
from proxy.children import Child, overspill_command, started

SLO_S = 2.0


def local_sim(args: argparse.Namespace) -> tuple[str, ...]:
    return (
        "--max-seqs",
        str(args.max_seqs),
        "--decode-base-ms",
        str(args.decode_base_ms),
        "--decode-per-seq-ms",
        str(args.decode_per_seq_ms),
        "--prefill-ms-per-token",
        "0.05",
        "--model",
        "m",
    )


CLOUD = (
    "--personality",
    "cloud",
    "--network-latency-ms",
    "150",
    "--decode-base-ms",
    "10",
    "--model",
    "cloud-m",
)


def policy(
    local: str,
    cloud: str,
    overflow: bool,
    ratio: float,
    slo: float,
    max_seqs: int,
    wire: str = "auto",
) -> str:
    text = f"""
[server]
probe_interval_s = 0.25
log_level = "warning"
[[backends]]
name = "local"
kind = "vllm"
url = "{local}"
models = ["m"]
max_concurrency = {max_seqs}
[[clouds]]
name = "cloud"
model = "openai/cloud-m"
api_base = "{cloud}/v1"
api_key_env = "BENCH_CLOUD_KEY"
wire = "{wire}"
"""
    if overflow:
        # ratio 2.0: up to 4 running and 4 queued (about one service time of wait), then cloud.
        # Measured: 2.5 and 1.8 s let a few requests past the 2 s SLO at 4C (98.3%).
        text += '[[routes]]\nmodel = "m"\ncloud = ["cloud"]\n[routes.overflow]\n'
        text += f"max_inflight_ratio = {ratio}\nttft_slo_s = {slo}\n"
    return text


@contextlib.contextmanager
def proxy(config: str) -> Iterator[Child]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "overspill.toml"
        path.write_text(config)
        command = overspill_command("serve", "--config", str(path), "--port", "0")
        with started(command, env={"BENCH_CLOUD_KEY": "sk-bench"}) as child:
            yield child


@dataclass(frozen=True)
class Outcome:
    ttft: float | None  # None: no first token before giving up (or an error)
    route: str


def request(tokens: int) -> dict[str, object]:
    return {
        "model": "m",
        "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": tokens,
        "stream": True,
    }


async def one(
    session: aiohttp.ClientSession, url: str, body: dict[str, object], give_up: float
) -> Outcome:
    start = time.perf_counter()
    try:
        async with asyncio.timeout(give_up):
            async with session.post(url + "/v1/chat/completions", json=body) as response:
                route = response.headers.get("x-overspill-route", "error")
                if response.status != 200:
                    return Outcome(None, route)
                first: float | None = None
                async for line in response.content:
                    if first is None and b'"content":"' in line and b'"content":""' not in line:
                        first = time.perf_counter() - start
                return Outcome(first, route)
    except (TimeoutError, aiohttp.ClientError):
        return Outcome(None, "gave up")


async def poisson(
    url: str,
    body: dict[str, object],
    rate: float,
    warmup: float,
    seconds: float,
    give_up: float,
    seed: int,
) -> list[Outcome]:
    """Poisson arrivals for warmup + seconds; the outcomes of those sent after the warm-up.
    Discarding the warm-up measures the steady state: queues and in-flight work are already at
    their level when the window opens, as they still are when it closes."""
    rng = random.Random(seed)
    tasks: list[asyncio.Task[Outcome]] = []
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        start = time.perf_counter()
        measured = 0
        while (now := time.perf_counter()) < start + warmup + seconds:
            if now < start + warmup:
                measured = len(tasks) + 1
            tasks.append(asyncio.create_task(one(session, url, body, give_up)))
            await asyncio.sleep(rng.expovariate(rate))
        return list(await asyncio.gather(*tasks))[measured:]


async def capacity(
    url: str, body: dict[str, object], clients: int, warmup: float = 4.0, seconds: float = 10.0
) -> float:
    """Requests/s the local engine completes when kept busy (clients in a closed loop), counted
    over a window that starts once the batch is full and ends before the clients wind down:
    the ramp-up and the drain would understate it."""
    finished: list[float] = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        start = time.perf_counter()
        end = start + warmup + seconds

        async def client() -> None:
            while time.perf_counter() < end:
                await one(session, url, body, 60)
                finished.append(time.perf_counter())

        await asyncio.gather(*(client() for _ in range(clients)))
    return sum(1 for t in finished if start + warmup <= t < end) / seconds


@dataclass(frozen=True)
class Row:
    mode: str
    load: float
    rate: float
    outcomes: list[Outcome]

    def ttfts(self) -> list[float]:
        return sorted(o.ttft if o.ttft is not None else float("inf") for o in self.outcomes)

    def pct(self, q: float) -> float:
        values = self.ttfts()
        return values[min(len(values) - 1, int(q * len(values)))]

    @property
    def slo_share(self) -> float:
        return sum(1 for t in self.ttfts() if t <= SLO_S) / len(self.outcomes)

    @property
    def cloud_share(self) -> float:
        return sum(1 for o in self.outcomes if o.route.startswith("cloud/")) / len(self.outcomes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--warmup", type=float, default=10, help="seconds, not measured")
    parser.add_argument("--give-up", type=float, default=30)
    parser.add_argument("--loads", default="0.5,1,2,4", help="multiples of C")
    parser.add_argument("--ratio", type=float, default=1.75, help="route max_inflight_ratio")
    parser.add_argument("--slo", type=float, default=1.5, help="route ttft_slo_s")
    parser.add_argument("--max-seqs", type=int, default=32, help="the local engine's batch size")
    parser.add_argument("--decode-base-ms", type=float, default=60)
    parser.add_argument("--decode-per-seq-ms", type=float, default=2)
    parser.add_argument("--tokens", type=int, default=16, help="answer length")
    parser.add_argument(
        "--wire",
        choices=["auto", "litellm", "openai"],
        default="auto",
        help="the cloud leg's path (auto, the product's default: relayed, for an openai/ model)",
    )
    args = parser.parse_args()
    loads = [float(x) for x in args.loads.split(",")]
    rows: list[Row] = []
    with (
        started(overspill_command("sim", "--port", "0", *local_sim(args))) as local,
        started(overspill_command("sim", "--port", "0", *CLOUD)) as cloud,
    ):
        body = request(args.tokens)
        c = asyncio.run(capacity(local.url, body, 4 * args.max_seqs))
        print(
            f"local capacity C = {c:.2f} requests/s ({args.tokens}-token answers)", file=sys.stderr
        )
        for mode, overflow in (("local only", False), ("overflow", True)):
            with proxy(
                policy(
                    local.url, cloud.url, overflow, args.ratio, args.slo, args.max_seqs, args.wire
                )
            ) as p:
                for i, load in enumerate(loads):
                    outcomes = asyncio.run(
                        poisson(p.url, body, load * c, args.warmup, args.seconds, args.give_up, i)
                    )
                    rows.append(Row(mode, load, load * c, outcomes))
                    row = rows[-1]
                    print(
                        f"  {mode:10} {load}C: p99 {row.pct(0.99):.2f}s slo {row.slo_share:.1%} "
                        f"cloud {row.cloud_share:.1%}",
                        file=sys.stderr,
                    )
                    asyncio.run(asyncio.sleep(3))  # let the queue drain between loads
    print(f"local capacity C = {c:.2f} requests/s\n")
    print(
        table(
            [
                "mode",
                "load",
                "req/s",
                "requests",
                "TTFT p50 s",
                "TTFT p99 s",
                f"TTFT <= {SLO_S:g}s",
                "to cloud",
                "excess over C",
            ],
            [
                [
                    r.mode,
                    f"{r.load:g}C",
                    round(r.rate, 2),
                    len(r.outcomes),
                    _s(r.pct(0.5)),
                    _s(r.pct(0.99)),
                    f"{r.slo_share:.1%}",
                    f"{r.cloud_share:.1%}",
                    f"{max(0.0, 1 - 1 / r.load):.1%}",
                ]
                for r in rows
            ],
        )
    )
    plot(rows)
    return 0


def _s(seconds: float) -> str:
    return "never" if seconds == float("inf") else f"{seconds:.2f}"


def plot(rows: list[Row]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ttft, share) = plt.subplots(1, 2, figsize=(10, 4))
    for mode, style in (("local only", "o-"), ("overflow", "s-")):
        mine = [r for r in rows if r.mode == mode]
        loads = [r.load for r in mine]
        p99 = [min(r.pct(0.99), 60.0) for r in mine]
        ttft.plot(loads, p99, style, label=f"{mode}: TTFT p99")
        share.plot(loads, [100 * r.slo_share for r in mine], style, label=f"{mode}: meets SLO")
    overflow = [r for r in rows if r.mode == "overflow"]
    share.plot(
        [r.load for r in overflow],
        [100 * r.cloud_share for r in overflow],
        "^--",
        label="overflow: sent to cloud",
    )
    share.plot(
        [r.load for r in overflow],
        [100 * max(0, 1 - 1 / r.load) for r in overflow],
        ":",
        color="grey",
        label="excess over C",
    )
    ttft.axhline(SLO_S, color="red", linestyle="--", linewidth=1, label="SLO 2 s")
    ttft.set_yscale("log")
    ttft.set_xlabel("offered load (x local capacity C)")
    ttft.set_ylabel("seconds")
    ttft.legend(fontsize=8)
    share.set_xlabel("offered load (x local capacity C)")
    share.set_ylabel("% of requests")
    share.legend(fontsize=8)
    fig.suptitle("Overflow before the queue explodes")
    fig.tight_layout()
    path = plot_path("overflow")
    fig.savefig(path, dpi=120)
    print(f"plot: {path}")


if __name__ == "__main__":
    sys.exit(main())
