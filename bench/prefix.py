"""Prefix-aware routing and prefix coalescing, side by side in one run, through the real proxy.

Part 1, routing. --groups groups of requests (tenants, apps) each share a prompt prefix of
1,000-2,000 tokens (a system prompt and four few-shot exchanges, of pseudo-random words, so no two
groups share text); every request adds a short question of its own and asks for --tokens tokens,
streamed. Arrivals are Poisson at --rate requests/s for --seconds, the groups interleaved in a
shuffled order; the same schedule (same seed) is replayed for round_robin, least_loaded and
prefix, each time against four fresh vLLM-personality simulators (cold caches) behind a fresh
`overspill serve`. Reported per strategy: the engines' prefix-cache hit rate in tokens (sum of
hits / sum of queries over the four /_sim/stats, over the run and over its second half, once the
caches are warm), prefill tokens computed, TTFT p50/p90/p99 at the client (first content chunk),
how many replicas served each group, and prefix vs least_loaded. Target (the issue): prefix at
least doubles the hit rate of least_loaded, cuts TTFT p50 by 30% or more, p99 no worse.

Why these settings. Timings are the simulator's vLLM defaults (an 8B model on an A100: decode
steps of 12 ms + 0.25 ms per running sequence, prefill 0.08 ms per token, so a cold 1.5k-token
prefix costs ~120 ms of prefill against ~15 ms for a cached one: prefill dominates TTFT). The KV
cache is 24,576 tokens per replica (--kv-tokens; for an 8B model 3 GiB of KV, about what a 24 GB
card leaves after the weights): the 32 prefixes make ~48k tokens, so one replica holds about half
of them, and the fleet all of them. That is the case routing decides: spread over every replica,
each one cycles all the prefixes through half the room; pinned, each holds its quarter. --max-seqs
32 (vLLM's 256 is for an 80 GB cache). 16 requests/s is about a third of what four replicas
prefill with no cache at all (~8 cold prefixes/s each), so queues stay short and the comparison
is about the cache, not about saturation.

Part 2, coalescing (bench/prefix_burst.py, whose docstring says more): --burst requests (16)
sharing a new ~2k-token prefix, all sent at once through the proxy with strategy "prefix",
warm_wait_s 0 (off, the default) and 2.0 (on), against fresh simulators (--burst-replicas, 4),
idle and busy with other work, --trials times each: prefill tokens computed, TTFT p50/p99,
where the 16 landed. `--parts engine` runs it against a real vLLM (the CPU build with
SmolLM2-135M, started with `overspill engine vllm --port 0` unless --engine URL names a running
one): one replica, a ~1,500-token prefix, 8-token answers, idle and with --engine-background
sequences decoding.

    .venv/bin/python -m bench.prefix [--seconds 36] [--rate 16] [--parts routing,coalescing]
    .venv/bin/python -m bench.prefix --parts engine [--engine http://127.0.0.1:8001]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from collections.abc import Sequence
from typing import Any

from bench.prefix_burst import (
    Background,
    Run,
    burst_table,
    coalescing,
    engine_coalescing,
    fmt_s,
    real_engine,
)
from bench.prefix_workload import (
    MODEL,
    Arrival,
    Counters,
    Outcome,
    body,
    config,
    proxy,
    replay,
    shared_prefix,
    sim_counters,
    sim_flags,
    sims,
)
from bench.report import plot_path, table

STRATEGIES = ("round_robin", "least_loaded", "prefix")


# -- part 1: routing ---------------------------------------------------------------------------


def schedule(args: argparse.Namespace) -> list[Arrival]:
    """Poisson arrivals; each group gets the same number of requests, in a shuffled order."""
    rng = random.Random(args.seed)
    sizes = [rng.randint(1000, 2000) for _ in range(args.groups)]
    prefixes = [shared_prefix(args.seed * 1000 + g, size) for g, size in enumerate(sizes)]
    per_group = max(1, round(args.rate * args.seconds / args.groups))
    order = [g for g in range(args.groups) for _ in range(per_group)]
    rng.shuffle(order)
    arrivals, at = [], 0.0
    for group in order:
        arrivals.append(Arrival(at, group, body(prefixes[group], rng, MODEL, args.tokens)))
        at += rng.expovariate(args.rate)
    return arrivals


def routing(args: argparse.Namespace, strategy: str, arrivals: list[Arrival]) -> Run:
    with sims(args.replicas, sim_flags(args)) as fleet:
        urls = [s.url for s in fleet]
        with proxy(config(urls, MODEL, strategy, args.warm_wait_s), len(urls)) as p:
            before = asyncio.run(sim_counters(urls))

            async def measure() -> tuple[list[Outcome], Counters]:
                run = asyncio.create_task(replay(p.url, arrivals, args.give_up))
                await asyncio.sleep(arrivals[len(arrivals) // 2].at)
                halfway = await sim_counters(urls)
                return await run, halfway

            outcomes, halfway = asyncio.run(measure())
            after = asyncio.run(sim_counters(urls))
    return Run(strategy, outcomes, after - before, after - halfway)


# -- report ------------------------------------------------------------------------------------


def routing_table(runs: Sequence[Run]) -> str:
    return table(
        [
            "strategy",
            "requests",
            "errors",
            "hit rate",
            "hit rate, 2nd half",
            "prefill computed",
            "TTFT p50 s",
            "TTFT p90 s",
            "TTFT p99 s",
            "replicas/group",
            "requests per replica",
        ],
        [
            [
                r.label,
                len(r.outcomes),
                r.errors,
                f"{r.counters.hit_rate:.1%}",
                f"{r.second_half.hit_rate:.1%}",
                r.counters.computed,
                fmt_s(r.pct(0.5)),
                fmt_s(r.pct(0.9)),
                fmt_s(r.pct(0.99)),
                round(r.replicas_per_group(), 2),
                r.landed(),
            ]
            for r in runs
        ],
    )


def verdict_table(base: Run, new: Run) -> tuple[str, bool]:
    hit = new.counters.hit_rate / base.counters.hit_rate if base.counters.hit_rate else float("inf")
    p50, p99 = new.pct(0.5) / base.pct(0.5), new.pct(0.99) / base.pct(0.99)
    computed = new.counters.computed / max(1, base.counters.computed)
    b, n = base.counters, new.counters
    checks = [
        ("hit rate", f"{b.hit_rate:.1%}", f"{n.hit_rate:.1%}", hit, ">= 2x", hit >= 2),
        ("prefill computed", b.computed, n.computed, computed, "", None),
        ("TTFT p50 s", fmt_s(base.pct(0.5)), fmt_s(new.pct(0.5)), p50, "<= 0.70x", p50 <= 0.7),
        ("TTFT p99 s", fmt_s(base.pct(0.99)), fmt_s(new.pct(0.99)), p99, "<= 1.00x", p99 <= 1),
    ]
    rows = [
        [name, old, now, f"{ratio:.2f}x", target, "" if ok is None else ("yes" if ok else "NO")]
        for name, old, now, ratio, target, ok in checks
    ]
    text = table(["", base.label, new.label, "ratio", "target", "met"], rows)
    return text, all(ok for *_, ok in checks if ok is not None)


def plot(routes: Sequence[Run], bursts: Sequence[Run], size: int, name: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    widths = [1.0, 1.0] * bool(routes) + [0.4 * len(bursts)] * bool(bursts)
    fig, axes = plt.subplots(
        1,
        len(widths),
        figsize=(4.5 * sum(widths), 4.5),
        squeeze=False,
        gridspec_kw={"width_ratios": widths},
    )
    left = list(axes[0])
    if routes:
        hits, ttft = left.pop(0), left.pop(0)
        names = [r.label for r in routes]
        hits.bar(
            names, [100 * r.counters.hit_rate for r in routes], color="tab:blue", label="whole run"
        )
        hits.plot(names, [100 * r.second_half.hit_rate for r in routes], "ko", label="2nd half")
        hits.set_ylabel("engine prefix-cache hit rate (% of prompt tokens)")
        hits.legend(fontsize=8)
        _ttft_bars(ttft, routes, names)
        ttft.set_title("TTFT per strategy", fontsize=10)
    if bursts:
        burst = left.pop(0)
        labels = [
            r.label.replace(", ", "\n") + f"\n{_mean_prefill(r):,.0f} prefilled each"
            for r in bursts
        ]
        _ttft_bars(burst, bursts, labels)
        burst.set_title(f"bursts of {size} sharing a new prefix: coalescing", fontsize=10)
    fig.suptitle("Prefix-aware routing and coalescing")
    fig.tight_layout()
    path = plot_path(name)
    fig.savefig(path, dpi=120)
    print(f"plot: {path}")


def _mean_prefill(run: Run) -> float:
    """A burst's own prefill (else all the engine computed meanwhile), mean over the bursts."""
    own = [n for n in run.per_trial if n is not None]
    if own and len(own) == len(run.per_trial):
        return sum(own) / len(own)
    return run.counters.computed / max(1, len(run.per_trial))


def _ttft_bars(ax: Any, runs: Sequence[Run], labels: list[str]) -> None:
    xs = range(len(runs))
    ax.bar([x - 0.2 for x in xs], [1000 * r.pct(0.5) for r in runs], 0.4, label="p50")
    ax.bar([x + 0.2 for x in xs], [1000 * r.pct(0.99) for r in runs], 0.4, label="p99")
    ax.set_xticks(list(xs), labels, fontsize=8)
    ax.set_ylabel("TTFT (ms)")
    ax.legend(fontsize=8)


# -- main --------------------------------------------------------------------------------------


def main() -> int:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--parts", default="routing,coalescing", help="routing,coalescing,engine")
    parser.add_argument("--seconds", type=float, default=36, help="part 1: arrivals for this long")
    parser.add_argument("--rate", type=float, default=16, help="part 1: requests/s (Poisson)")
    parser.add_argument("--groups", type=int, default=32, help="part 1: distinct shared prefixes")
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--kv-tokens", type=int, default=24_576, help="per replica")
    parser.add_argument("--max-seqs", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=32, help="answer length")
    parser.add_argument("--warm-wait-s", type=float, default=0.0, help="part 1's warm_wait_s")
    parser.add_argument("--burst", type=int, default=16, help="part 2: requests sent at once")
    parser.add_argument("--burst-tokens", type=int, default=2000, help="part 2: shared prefix")
    parser.add_argument("--burst-replicas", type=int, default=4)
    parser.add_argument("--trials", type=int, default=3, help="part 2: bursts per mode, pooled")
    parser.add_argument(
        "--background-rate",
        type=float,
        default=3.0,
        help="part 2, busy: other requests/s per replica",
    )
    parser.add_argument("--background-prompt", type=int, default=1500, help="their prompt")
    parser.add_argument("--engine", help="a running vLLM for part 'engine' (default: start one)")
    parser.add_argument("--engine-tokens", type=int, default=1500, help="its shared prefix")
    parser.add_argument("--engine-background", type=int, default=2, help="its busy sequences")
    parser.add_argument("--give-up", type=float, default=60)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    routes: list[Run] = []
    bursts: list[Run] = []
    if "routing" in parts:
        arrivals = schedule(args)
        for strategy in STRATEGIES:
            routes.append(routing(args, strategy, arrivals))
            r = routes[-1]
            print(
                f"  {strategy}: hit {r.counters.hit_rate:.1%} p50 {fmt_s(r.pct(0.5))} "
                f"p99 {fmt_s(r.pct(0.99))}",
                file=sys.stderr,
            )
    if "coalescing" in parts:
        busy = Background(MODEL, args.background_rate, args.background_prompt, 4)
        bursts += [
            coalescing(args, background, wait)
            for background in (Background(MODEL), busy)
            for wait in (0.0, 2.0)
        ]
    if "engine" in parts:
        with real_engine(args.engine) as url:
            runs = [(b, w) for b in (0, args.engine_background) for w in (0.0, 2.0)]
            salt = time.time_ns() % 10**9  # new prefixes each time: a running engine kept its cache
            bursts += [
                engine_coalescing(args, url, b, w, salt + i) for i, (b, w) in enumerate(runs)
            ]
    met = True
    if routes:
        print(
            f"Part 1: {len(routes[0].outcomes)} requests at {args.rate:g}/s, {args.groups} "
            f"groups, {args.replicas} replicas of {args.kv_tokens:,} KV tokens\n"
        )
        print(routing_table(routes) + "\n")
        text, met = verdict_table(routes[1], routes[2])
        print(text + "\n")
    if bursts:
        print(f"Part 2: {args.burst} requests at once sharing a new prefix, strategy prefix\n")
        print(burst_table(bursts, args.burst) + "\n")
    # A run without part 1 does not overwrite the full run's plot.
    name = "_".join(["prefix", *sorted(parts - {"routing"})]) if not routes else "prefix"
    plot(routes, bursts, args.burst, name)
    if routes:
        print("targets met" if met else "targets NOT met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
