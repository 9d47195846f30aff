"""What does the proxy cost, row by row, side by side in one run?

Each row sends the same load to one server and says what answers it; each checks it:
- direct:                 the engine simulator itself (vllm personality, zero modelled latency);
- bare forwarder:         Starlette + aiohttp in a few lines (bench/bare_forwarder.py), the floor;
- overspill forwarding:   cache and coalescing off, every body distinct: nothing but forwarding
                          can answer (the engine must receive every request);
- overspill forwarding (a cloud idle): the same with a cloud target configured and never used
                          (litellm loaded): what is loaded but idle must not cost the local leg;
- overspill exact hit:    the exact cache on, one body: every request after the first is a hit
                          (the engine must receive at most one);
- overspill semantic miss: the semantic cache on, distinct temperature-0 prompts: every request
                          is embedded, looked up, missed and stored (the engine receives all);
- cloud, bare forwarder:  the floor again, to a cloud-personality simulator;
- overspill cloud leg:    a route whose only target is that simulator, as a cloud target
                          through litellm, distinct bodies (the cloud receives all);
- overspill cloud leg (openai wire): the same target with `wire = "openai"` (relayed as bytes);
- litellm proxy:          LiteLLM's proxy, one worker, to the engine simulator (optional).

Non-streamed and streamed chat completions (8 output tokens, or --tokens: the simulators answer
with exactly as many) at concurrency 1, 16 and 64, by wrk. Layout on 2 cores: the simulators
and wrk share core 0, the server under test has core 1.
Reports added latency p50/p99 over the row's own direct baseline, throughput, and the server's
CPU time per request (with its children). A row whose engine received other than it claims
fails the bench. Every process it starts stops with it (LiteLLM's too).

    .venv/bin/python -m bench.overhead [--seconds 5] [--skip-litellm] [--rows a,b] [--tokens 8]
                                       [--rounds 1]

Every row's server is up for the whole run. With --rounds N each cell (mode, concurrency) is
measured N times, the rows taking turns, and the round with the median CPU per request is
reported: this machine's speed drifts by up to 2x within minutes, and rows measured one after
the other would compare different machines.

LiteLLM is installed on first use into bench/.venv-litellm (pip install 'litellm[proxy]').
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from dataclasses import dataclass

import httpx

from bench.loadgen import BENCH_KEY, Load, cpu_seconds, wrk
from bench.overhead_servers import (
    LEVELS,
    bare,
    body,
    litellm,
    overspill,
    settled,
    simulator,
)
from bench.report import plot_path, table
from proxy.children import Child

HEADERS = {"content-type": "application/json", "authorization": f"Bearer {BENCH_KEY}"}


@dataclass(frozen=True)
class Row:
    """One server, and what must answer its requests."""

    name: str
    distinct: bool  # every body different
    engine_gets: str  # "all": the engine receives every request; "first": at most one
    baseline: str = "direct"  # the row its added latency is counted from


ROWS = (
    Row("direct", True, "all"),
    Row("bare forwarder", True, "all"),
    Row("overspill forwarding", True, "all"),
    Row("overspill forwarding (a cloud idle)", True, "all"),
    Row("overspill exact hit", False, "first"),
    Row("overspill semantic miss", True, "all"),
    Row("cloud direct", True, "all", "cloud direct"),
    Row("cloud bare forwarder", True, "all", "cloud direct"),
    Row("overspill cloud leg", True, "all", "cloud direct"),
    Row("overspill cloud leg (openai wire)", True, "all", "cloud direct"),
    Row("litellm proxy", True, "all"),
)


@dataclass(frozen=True)
class Cell:
    server: str
    stream: bool
    concurrency: int
    load: Load
    cpu_ms_per_request: float | None
    engine_received: int


class Mismatch(Exception):
    """A row's engine did not receive what the row claims: its figures would measure
    something else."""


@dataclass(frozen=True)
class Serving:
    """A row's server, up for the whole run (None: the row sends to its engine directly)."""

    row: Row
    child: Child | None
    url: str
    upstream: Child  # the simulator that must receive the row's requests


def warm_up(serving: Serving, tokens: int) -> None:
    endpoint = serving.url + "/v1/chat/completions"
    row = serving.row
    warm = body(False, False).replace("Say hello", f"warm up {row.name}")
    httpx.post(endpoint, content=warm, headers=HEADERS, timeout=60).raise_for_status()
    wrk(endpoint, body(False, row.distinct, tokens), 8, 1, distinct=_tag(row, "warm"))


def measure(serving: Serving, stream: bool, concurrency: int, seconds: int, tokens: int) -> Cell:
    row, child, engine = serving.row, serving.child, serving.upstream
    before_cpu = cpu_seconds(child.popen.pid) if child else 0.0
    before = settled(engine)
    tag = _tag(row, f"{stream}-{concurrency}")
    sent = body(stream, row.distinct, tokens)
    load = wrk(serving.url + "/v1/chat/completions", sent, concurrency, seconds, distinct=tag)
    got = settled(engine) - before
    cpu = (cpu_seconds(child.popen.pid) - before_cpu) if child else None
    per_request = cpu / load.requests * 1000 if cpu is not None and load.requests else None
    cell = Cell(row.name, stream, concurrency, load, per_request, got)
    check(row, cell)
    print(
        f"  {row.name:24} stream={stream!s:5} c={concurrency:<3} {load.rps:8.0f} req/s "
        f"p50 {load.p50_ms:.2f} ms p99 {load.p99_ms:.2f} ms errors {load.errors} "
        f"engine got {got}" + (f" CPU {per_request:.3f} ms/req" if per_request else ""),
        file=sys.stderr,
    )
    return cell


def median_round(rounds: list[Cell]) -> Cell:
    """The round with the median CPU per request (or, for a direct row, the median p50)."""
    key = (
        (lambda c: c.cpu_ms_per_request or 0.0)
        if rounds[0].cpu_ms_per_request is not None
        else (lambda c: c.load.p50_ms)
    )
    return sorted(rounds, key=key)[len(rounds) // 2]


def _tag(row: Row, part: str) -> str:
    """A tag no other run of any row shares (bodies of one row never repeat another's)."""
    return f"{row.name.replace(' ', '-')}-{part}-{time.monotonic_ns()}"


def check(row: Row, cell: Cell) -> None:
    """The engine received what the row claims: every request (wrk counts those answered; up
    to one per connection more may have been in flight when it stopped), or at most one."""
    answered, got = cell.load.requests, cell.engine_received
    expected = (
        range(2) if row.engine_gets == "first" else range(answered, answered + cell.concurrency + 1)
    )
    ok = got in expected
    if not ok or cell.load.errors:
        raise Mismatch(
            f"{row.name} (stream={cell.stream}, c={cell.concurrency}): {answered} answered, "
            f"{cell.load.errors} errors, the engine received {got} ({row.engine_gets} expected)"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--skip-litellm", action="store_true")
    parser.add_argument("--rows", help="only these rows (comma-separated names)")
    parser.add_argument("--tokens", type=int, default=8, help="output tokens of every answer")
    parser.add_argument(
        "--rounds", type=int, default=1, help="measures of each cell, the rows taking turns"
    )
    args = parser.parse_args()
    wanted = set(args.rows.split(",")) if args.rows else {row.name for row in ROWS}
    if args.skip_litellm:
        wanted.discard("litellm proxy")
    rows = [row for row in ROWS if row.name in wanted]
    cells: list[Cell] = []
    tokens = args.tokens
    with (
        simulator(tokens=tokens) as engine,
        simulator("cloud", tokens) as cloud,
        contextlib.ExitStack() as servers,
    ):
        up = [serve(row, engine, cloud, servers) for row in rows]
        for serving in up:
            warm_up(serving, tokens)
        for stream in (False, True):
            for concurrency in LEVELS:
                rounds: dict[str, list[Cell]] = {row.name: [] for row in rows}
                for _ in range(args.rounds):  # a drift in the machine's speed slows every row
                    for serving in up:
                        cell = measure(serving, stream, concurrency, args.seconds, tokens)
                        rounds[serving.row.name].append(cell)
                cells += [median_round(measured) for measured in rounds.values()]
    cells.sort(key=lambda c: [row.name for row in rows].index(c.server))
    print(report(cells, rows))
    plot(cells)
    return 0


def serve(row: Row, engine: Child, cloud: Child, servers: contextlib.ExitStack) -> Serving:
    """Starts the row's server (if any), stopped with `servers`."""
    upstream = cloud if row.name.startswith(("cloud", "overspill cloud")) else engine
    if row.name in ("direct", "cloud direct"):
        return Serving(row, None, upstream.url, upstream)
    if row.name.endswith("bare forwarder"):
        server = bare(upstream.url)
    elif row.name == "litellm proxy":
        server = litellm(upstream.url)
    else:
        server = overspill(row.name.removeprefix("overspill "), upstream.url)
    child = servers.enter_context(server)
    return Serving(row, child, child.url, upstream)


def report(cells: list[Cell], measured: list[Row]) -> str:
    loads = {(c.server, c.stream, c.concurrency): c.load for c in cells}
    baseline = {row.name: row.baseline for row in measured}
    rows = []
    for c in cells:
        base = loads.get((baseline[c.server], c.stream, c.concurrency), c.load)
        added50 = c.load.p50_ms - base.p50_ms
        added99 = c.load.p99_ms - base.p99_ms
        cpu = f"{c.cpu_ms_per_request:.3f}" if c.cpu_ms_per_request is not None else "-"
        rows.append(
            [
                c.server,
                "stream" if c.stream else "whole",
                c.concurrency,
                round(c.load.rps),
                round(c.load.p50_ms, 2),
                round(added50, 2),
                round(c.load.p99_ms, 2),
                round(added99, 2),
                cpu,
                c.engine_received,
                c.load.errors,
            ]
        )
    headers = [
        "server",
        "mode",
        "conc",
        "req/s",
        "p50 ms",
        "+p50 ms",
        "p99 ms",
        "+p99 ms",
        "CPU ms/req",
        "engine got",
        "errors",
    ]
    lines = [table(headers, rows), "", ratios(cells)]
    return "\n".join(lines)


# (row, the floor it is compared with): the goals are CPU per request against the floor.
COMPARED = (
    ("overspill forwarding", "bare forwarder"),
    ("overspill forwarding (a cloud idle)", "overspill forwarding"),
    ("overspill exact hit", "bare forwarder"),
    ("overspill semantic miss", "bare forwarder"),
    ("overspill cloud leg", "cloud bare forwarder"),
    ("overspill cloud leg", "overspill forwarding"),
    ("overspill cloud leg (openai wire)", "cloud bare forwarder"),
    ("overspill cloud leg (openai wire)", "overspill forwarding"),
    ("litellm proxy", "bare forwarder"),
)


def ratios(cells: list[Cell]) -> str:
    found = {(c.server, c.stream, c.concurrency): c for c in cells}
    lines = []
    for stream in (False, True):
        mode = "streamed" if stream else "whole"
        for row, floor in COMPARED:
            ours, base = found.get((row, stream, 16)), found.get((floor, stream, 16))
            if ours and base and ours.cpu_ms_per_request and base.cpu_ms_per_request:
                ratio = ours.cpu_ms_per_request / base.cpu_ms_per_request
                lines.append(f"{mode}: {row} CPU/request = {ratio:.2f}x {floor} (c=16)")
        one, direct = (
            found.get(("overspill forwarding", stream, 1)),
            found.get(("direct", stream, 1)),
        )
        if one and direct:
            added = one.load.p50_ms - direct.load.p50_ms
            lines.append(f"{mode}: overspill forwarding added p50 at c=1 = {added:.2f} ms")
    return "\n".join(lines)


def plot(cells: list[Cell]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    servers = list(dict.fromkeys(c.server for c in cells))
    fig, axes = plt.subplots(1, 2, figsize=(14, 4.5))
    for ax, stream in zip(axes, (False, True), strict=True):
        width = 0.8 / len(servers)
        for i, server in enumerate(servers):
            values = [
                next(
                    c.load.rps
                    for c in cells
                    if (c.server, c.stream, c.concurrency) == (server, stream, level)
                )
                for level in LEVELS
            ]
            xs = [j + (i - (len(servers) - 1) / 2) * width for j in range(len(LEVELS))]
            ax.bar(xs, values, width, label=server)
        ax.set_xticks(range(len(LEVELS)), [f"c={level}" for level in LEVELS])
        ax.set_yscale("log")
        ax.set_ylabel("requests/s (log)")
        ax.set_title("streamed" if stream else "non-streamed")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(servers), fontsize=9)
    fig.suptitle("Proxy overhead: same simulator, one core per server")
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    path = plot_path("overhead")
    fig.savefig(path, dpi=120)
    print(f"plot: {path}")


if __name__ == "__main__":
    sys.exit(main())
