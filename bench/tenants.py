"""Many teams, one engine: rate-limit isolation and priority classes, side by side in one run,
through the real proxy in front of one vLLM-like simulator (8 sequences, ~16-token answers).

Part 1, isolation. Tenant "quiet" (no limits) sends --rate requests/s (Poisson) for --seconds;
its end-to-end latency is measured alone, then with tenant "noisy" (requests_per_minute 120,
burst_s 10: 20 at once from a full bucket) sending at ten times its limit (open loop), then with
"noisy" hammering with --hammer closed-loop clients that never wait. Noisy starts --warmup
seconds before quiet, so the burst its full bucket allows is spent before quiet is measured:
what is measured is an over-limit tenant held to its rate. Reported: quiet's p50/p99 and their
ratio to running alone (target: within 10%), noisy's answers by status, and a check of
Retry-After: after a 429 that says r s, a retry r s later is admitted.

Part 2, priorities. The route overflows at in-flight/max_concurrency 1.0, so past 8 requests the
proxy's waiting room holds the rest. Tenant "app" (interactive) streams --rate requests/s and its
time to first token is measured; tenant "nightly" floods with --flood closed-loop clients. Three
runs: app alone; the flood in the same class as app (no priorities: first come, first served);
the flood as class batch (local_share 0.75, no overflow, waits up to 600 s). Reported: app's TTFT
p50/p99 against --slo (target: p99 within it with priorities), nightly's answers per second
(target: still progressing).

    .venv/bin/python -m bench.tenants [--seconds 20] [--rate 3] [--slo 1.0] [--parts 1,2]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from bench.report import plot_path, table
from proxy.children import Child, overspill_command, started

ENGINE = (
    "--model",
    "m",
    "--max-seqs",
    "8",
    "--decode-base-ms",
    "25",
    "--decode-per-seq-ms",
    "1",
    "--prefill-ms-per-token",
    "0.02",
    "--output-tokens",
    "16",
)


def policy(engine: str, flood_class: str) -> str:
    return f"""
[server]
probe_interval_s = 0.2
log_level = "warning"
[cache]
enabled = false
[[backends]]
name = "local"
kind = "vllm"
url = "{engine}"
models = ["m"]
max_concurrency = 8
[[routes]]
model = "m"
[routes.overflow]
max_inflight_ratio = 1.0
[priorities]
classes = [
  {{ name = "interactive", max_wait_s = 30 }},
  {{ name = "batch", local_share = 0.75, overflow = false, max_wait_s = 600 }},
]
[[tenants]]
name = "noisy"
requests_per_minute = 120
[[tenants]]
name = "quiet"
[[tenants]]
name = "app"
[[tenants]]
name = "nightly"
priority = "{flood_class}"
"""


@contextlib.contextmanager
def stack(flood_class: str = "batch") -> Iterator[Child]:
    sim = overspill_command("sim", "--port", "0", *ENGINE)
    with started(sim) as engine, tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "overspill.toml"
        path.write_text(policy(engine.url, flood_class))
        with started(overspill_command("serve", "--config", str(path), "--port", "0")) as proxy:
            yield proxy


def body(text: str, stream: bool = False) -> dict[str, object]:
    return {
        "model": "m",
        "messages": [{"role": "user", "content": text}],
        "max_tokens": 16,
        "stream": stream,
    }


@dataclass
class Tally:
    seconds: list[float] = field(default_factory=list)  # latency or TTFT of the 200s
    statuses: Counter[int] = field(default_factory=Counter)

    def pct(self, q: float) -> float:
        ordered = sorted(self.seconds)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def ask(
    session: aiohttp.ClientSession, url: str, tenant: str, tally: Tally, stream: bool = False
) -> None:
    started_at = time.perf_counter()
    headers = {"x-overspill-tenant": tenant}
    async with session.post(
        url + "/v1/chat/completions", json=body(tenant, stream), headers=headers
    ) as response:
        first = None
        async for _ in response.content.iter_any():
            first = first or time.perf_counter()
        tally.statuses[response.status] += 1
        if response.status == 200:
            end = first if stream and first else time.perf_counter()
            tally.seconds.append(end - started_at)


async def open_loop(
    session: aiohttp.ClientSession,
    url: str,
    tenant: str,
    rate: float,
    seconds: float,
    tally: Tally,
    stream: bool = False,
    seed: int = 1,
) -> None:
    rng = random.Random(seed)
    tasks, deadline, at = [], time.perf_counter() + seconds, time.perf_counter()
    while at < deadline:
        await asyncio.sleep(max(0.0, at - time.perf_counter()))
        tasks.append(asyncio.create_task(ask(session, url, tenant, tally, stream)))
        at += rng.expovariate(rate)
    await asyncio.gather(*tasks)


async def closed_loop(
    session: aiohttp.ClientSession,
    url: str,
    tenant: str,
    clients: int,
    seconds: float,
    tally: Tally,
) -> None:
    deadline = time.perf_counter() + seconds

    async def client() -> None:
        while time.perf_counter() < deadline:
            await ask(session, url, tenant, tally)

    await asyncio.gather(*(client() for _ in range(clients)))


def session() -> aiohttp.ClientSession:
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0), timeout=aiohttp.ClientTimeout(total=900)
    )


# --- part 1: isolation ----------------------------------------------------------------------


async def isolation_run(url: str, noisy: str, args: argparse.Namespace) -> tuple[Tally, Tally]:
    quiet, loud = Tally(), Tally()
    span = args.warmup + args.seconds

    async def measured() -> None:
        await asyncio.sleep(args.warmup)
        await open_loop(s, url, "quiet", args.rate, args.seconds, quiet)

    async with session() as s:
        work = [measured()]
        if noisy == "10x its limit":
            work.append(open_loop(s, url, "noisy", 20.0, span, loud, seed=2))
        elif noisy == "hammering":
            work.append(closed_loop(s, url, "noisy", args.hammer, span, loud))
        await asyncio.gather(*work)
    return quiet, loud


async def retry_after_check(url: str) -> str:
    """Exhaust noisy's bucket, then retry exactly when Retry-After says."""
    async with session() as s:
        for _ in range(200):
            async with s.post(
                url + "/v1/chat/completions",
                json=body("x"),
                headers={"x-overspill-tenant": "noisy"},
            ) as response:
                await response.read()
                if response.status == 429:
                    wait = int(response.headers["Retry-After"])
                    break
        else:
            return "never refused"
        await asyncio.sleep(wait)
        async with s.post(
            url + "/v1/chat/completions", json=body("x"), headers={"x-overspill-tenant": "noisy"}
        ) as response:
            await response.read()
            return f"refused with Retry-After {wait} s; retried {wait} s later: {response.status}"


def isolation(args: argparse.Namespace) -> tuple[list[tuple[str, Tally, Tally]], str]:
    runs = []
    for noisy in ("none (alone)", "10x its limit", "hammering"):
        with stack() as proxy:
            quiet, loud = asyncio.run(isolation_run(proxy.url, noisy, args))
        runs.append((noisy, quiet, loud))
        print(f"  isolation, noisy {noisy}: done", file=sys.stderr)
    with stack() as proxy:
        check = asyncio.run(retry_after_check(proxy.url))
    return runs, check


def isolation_table(runs: Sequence[tuple[str, Tally, Tally]]) -> str:
    alone = runs[0][1]
    rows = []
    for noisy, quiet, loud in runs:
        statuses = ", ".join(f"{code}: {n}" for code, n in sorted(loud.statuses.items())) or "-"
        rows.append(
            [
                noisy,
                len(quiet.seconds),
                round(1000 * quiet.pct(0.5)),
                round(1000 * quiet.pct(0.99)),
                f"{quiet.pct(0.5) / alone.pct(0.5):.2f}x",
                f"{quiet.pct(0.99) / alone.pct(0.99):.2f}x",
                statuses,
            ]
        )
    return table(
        [
            "noisy tenant",
            "quiet answers",
            "quiet p50 ms",
            "quiet p99 ms",
            "p50 vs alone",
            "p99 vs alone",
            "noisy answers by status",
        ],
        rows,
    )


# --- part 2: priorities ---------------------------------------------------------------------


async def priority_run(url: str, flood: bool, args: argparse.Namespace) -> tuple[Tally, Tally]:
    app, nightly = Tally(), Tally()
    async with session() as s:
        work = [open_loop(s, url, "app", args.rate, args.seconds, app, stream=True)]
        if flood:
            work.append(closed_loop(s, url, "nightly", args.flood, args.seconds, nightly))
        await asyncio.gather(*work)
    return app, nightly


def priorities(args: argparse.Namespace) -> list[tuple[str, Tally, Tally]]:
    runs = []
    for name, flood, flood_class in (
        ("app alone", False, "batch"),
        ("flood, same class (FIFO)", True, "interactive"),
        ("flood as batch", True, "batch"),
    ):
        with stack(flood_class) as proxy:
            app, nightly = asyncio.run(priority_run(proxy.url, flood, args))
        runs.append((name, app, nightly))
        print(f"  priorities, {name}: done", file=sys.stderr)
    return runs


def priority_table(runs: Sequence[tuple[str, Tally, Tally]], args: argparse.Namespace) -> str:
    rows = []
    for name, app, nightly in runs:
        within = sum(s <= args.slo for s in app.seconds) / max(len(app.seconds), 1)
        rows.append(
            [
                name,
                len(app.seconds),
                round(1000 * app.pct(0.5)),
                round(1000 * app.pct(0.99)),
                f"{within:.1%}",
                round(len(nightly.seconds) / args.seconds, 1),
                sum(n for code, n in nightly.statuses.items() if code != 200),
            ]
        )
    return table(
        [
            "run",
            "app answers",
            "app TTFT p50 ms",
            "app TTFT p99 ms",
            f"app TTFT <= {args.slo:g} s",
            "nightly answers/s",
            "nightly refused",
        ],
        rows,
    )


def plot(
    isolated: Sequence[tuple[str, Tally, Tally]],
    ranked: Sequence[tuple[str, Tally, Tally]],
    slo: float,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [p for p in (isolated, ranked) if p]
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4), squeeze=False)
    for ax, runs in zip(axes[0], panels, strict=True):
        labels = [name for name, _, _ in runs]
        xs = range(len(runs))
        ax.bar([x - 0.2 for x in xs], [1000 * t.pct(0.5) for _, t, _ in runs], 0.4, label="p50")
        ax.bar([x + 0.2 for x in xs], [1000 * t.pct(0.99) for _, t, _ in runs], 0.4, label="p99")
        ax.set_xticks(list(xs), labels, fontsize=8)
        ax.legend(fontsize=8)
    if isolated:
        axes[0][0].set_title("quiet tenant's latency, ms")
    if ranked:
        ax = axes[0][len(panels) - 1]
        ax.set_title("interactive tenant's TTFT, ms")
        ax.axhline(1000 * slo, color="red", linestyle="--", linewidth=0.8)
    fig.tight_layout()
    path = plot_path("tenants")
    fig.savefig(path, dpi=120)
    print(f"plot: {path}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rate", type=float, default=3.0, help="quiet's and app's requests/s")
    parser.add_argument("--hammer", type=int, default=16, help="noisy's closed-loop clients")
    parser.add_argument("--warmup", type=float, default=5.0, help="noisy's head start, s")
    parser.add_argument("--flood", type=int, default=32, help="nightly's closed-loop clients")
    parser.add_argument("--slo", type=float, default=1.0, help="app's TTFT SLO, seconds")
    parser.add_argument("--parts", default="1,2")
    args = parser.parse_args(argv)
    isolated: list[tuple[str, Tally, Tally]] = []
    ranked: list[tuple[str, Tally, Tally]] = []
    if "1" in args.parts:
        isolated, check = isolation(args)
        print("\npart 1: a tenant over its rate limit, another at a steady rate\n")
        print(isolation_table(isolated))
        print(f"\nRetry-After: {check}")
    if "2" in args.parts:
        ranked = priorities(args)
        print("\npart 2: a batch flood and an interactive tenant\n")
        print(priority_table(ranked, args))
    plot(isolated, ranked, args.slo)
    return 0


if __name__ == "__main__":
    sys.exit(main())
