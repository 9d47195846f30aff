"""Thousands of concurrent SSE streams: does the proxy keep up, side by side with its floor?

Three rows, each holding 500, 1,000 and 2,000 chat completion streams (stream=true, every body
distinct) open at once for `--seconds`, each stream `--tokens` tokens long (a client worker
starts its next stream when one ends; the first ones are spread over one stream's length):
- direct:               the engine simulator itself;
- bare forwarder:       Starlette + aiohttp in a few lines (bench/bare_forwarder.py), the floor;
- overspill forwarding: cache and coalescing off (bench/overhead_servers.py's config): nothing but
                        forwarding answers, so the engine must receive every stream.

The simulator (vllm personality) runs every stream at once: room for 4,096 sequences, one token
per stream every `--step-ms` (32 x 300 ms: ~10 s a stream), its tokens in bursts, one per engine
step, as from vLLM. Layout on 2 cores: the simulator and the client (bench/streams_client.py, one
uvloop process) share core 0, the server under test has core 1. At 2,000 streams and 200 ms steps
core 0 itself saturated (the direct row's TTFT p99 reached 7 s): hence 300 ms by default.

Per row and level: streams started and completed, errors by kind, TTFT and inter-token gap
p50/p99 (measured at the client), the server's peak RSS and CPU seconds, the client's and the
engine's CPU seconds (core 0 must not be the bottleneck), the CPU anything else on the machine
used meanwhile (a shared machine makes p99s noisy), and for Overspill its event loop's lag
(/metrics) and its TTFT p99 and gap p99 against the bare forwarder's (goal: within 1.2x, no error
of its own). A row whose engine received other than the streams it sent fails the bench, after
the table. Every process it starts stops with it.

    .venv/bin/python -m bench.streams [--levels 500,1000,2000] [--rows direct,...] [--tokens 32]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.loadgen import cpu_seconds
from bench.overhead_servers import MODEL, ROOT, bare, overspill, pinned, settled
from bench.report import plot_path, table
from bench.streams_client import Summary
from proxy.children import Child, die_with_parent, overspill_command, started

ROWS = ("direct", "bare forwarder", "overspill forwarding")
FLOOR = "bare forwarder"
GOAL = 1.2  # Overspill's p99s at most this many times the floor's
LAG_METRIC = "overspill_event_loop_lag_seconds_bucket"


@dataclass(frozen=True)
class Cell:
    row: str
    level: int
    summary: Summary
    engine_received: int
    server_cpu_s: float | None = None
    server_peak_rss_mb: float | None = None
    engine_cpu_s: float | None = None
    other_cpu_s: float | None = None  # anything else on the machine meanwhile: a shared machine
    loop_lag: dict[float, int] | None = None  # wake-ups per lag bucket (Overspill only)

    @property
    def mismatch(self) -> str | None:
        sent = self.summary.started
        if self.engine_received == sent:
            return None
        return f"{self.row} ({self.level} streams): sent {sent}, engine got {self.engine_received}"


# -- the processes ----------------------------------------------------------------------------


@contextlib.contextmanager
def simulator(step_ms: float, tokens: int) -> Iterator[Child]:
    """A vLLM-like engine holding every stream at once, one token per stream each step."""
    command = overspill_command(
        "sim", "--port", "0", "--model", MODEL, "--personality", "vllm",
        "--max-seqs", "4096", "--max-batched-tokens", "262144",
        "--decode-base-ms", str(step_ms), "--decode-per-seq-ms", "0",
        "--prefill-ms-per-token", "0", "--output-tokens", str(tokens),
    )  # fmt: skip
    with started(pinned("0", command)) as child:
        yield child


@contextlib.contextmanager
def server(row: str, upstream: str) -> Iterator[Child | None]:
    if row == "direct":
        yield None
    elif row == FLOOR:
        with bare(upstream) as child:
            yield child
    else:
        with overspill(row.removeprefix("overspill "), upstream) as child:
            yield child


def run_client(
    url: str, streams: int, seconds: float, tokens: int, tag: str, ramp_s: float = 0.0
) -> Summary:
    """The client in its own process on core 0; it stops with the bench (Ctrl-C included)."""
    drain_s = 70.0  # past Overspill's 60 s first-byte timeout: its 504s are counted as such
    command = pinned(
        "0",
        [
            sys.executable, "-m", "bench.streams_client", "--url", url + "/v1/chat/completions",
            "--streams", str(streams), "--seconds", str(seconds), "--tokens", str(tokens),
            "--tag", tag, "--drain-s", str(drain_s), "--ramp-s", str(ramp_s),
        ],
    )  # fmt: skip
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        cwd=str(ROOT),
        timeout=seconds + drain_s + 60,
        preexec_fn=die_with_parent,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the stream client failed ({done.returncode}): {done.stderr[-2000:]}")
    return Summary.from_json(done.stdout.strip().splitlines()[-1])


class PeakRSS:
    """Samples a process's resident memory (with its children) every `every_s` while open."""

    def __init__(self, pid: int, every_s: float = 0.1) -> None:
        self.pid, self.every_s, self.peak_kb = pid, every_s, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak_kb = max(self.peak_kb, rss_kb(self.pid))
            self._stop.wait(self.every_s)


def busy_seconds() -> float:
    """CPU time the whole machine has spent busy (every core), from /proc/stat."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def rss_kb(pid: int) -> int:
    total = 0
    for child in [pid, *_children(pid)]:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{child}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total


def _children(pid: int) -> list[int]:
    with contextlib.suppress(OSError):
        path = Path(f"/proc/{pid}/task/{pid}/children")
        return [int(p) for p in path.read_text().split()]
    return []


def loop_lag(url: str) -> dict[float, int]:
    """Overspill's event loop lag histogram from /metrics: cumulative wake-ups per bucket."""
    text = httpx.get(url + "/metrics", timeout=10).text
    buckets: dict[float, int] = {}
    for line in text.splitlines():
        if line.startswith(LAG_METRIC):
            bound = line.split('le="', 1)[1].split('"', 1)[0]
            buckets[float(bound)] = int(float(line.rsplit(" ", 1)[1]))
    return buckets


# -- one row ----------------------------------------------------------------------------------


def measure(
    row: str, child: Child | None, url: str, engine: Child, args: argparse.Namespace
) -> list[Cell]:
    run_client(url, 8, 1, args.tokens, f"warm-{_tag(row)}")  # first connections, imports
    ramp_s = args.tokens * args.step_ms / 1000  # one stream's length: arrivals spread evenly
    cells = []
    for level in args.levels:
        before_engine, before_sim = settled(engine), cpu_seconds(engine.popen.pid)
        before_busy = busy_seconds()
        before_cpu = cpu_seconds(child.popen.pid) if child else 0.0
        before_lag = loop_lag(url) if row.startswith("overspill") else None
        with PeakRSS(child.popen.pid if child else engine.popen.pid) as rss:
            tag = _tag(f"{row}-{level}")
            summary = run_client(url, level, args.seconds, args.tokens, tag, ramp_s)
        busy = busy_seconds() - before_busy
        got = settled(engine) - before_engine
        lag = None if before_lag is None else _delta(loop_lag(url), before_lag)
        server_cpu = cpu_seconds(child.popen.pid) - before_cpu if child else None
        engine_cpu = cpu_seconds(engine.popen.pid) - before_sim
        ours = (server_cpu or 0.0) + engine_cpu + summary.client_cpu_s
        cell = Cell(
            row,
            level,
            summary,
            got,
            server_cpu_s=server_cpu,
            server_peak_rss_mb=rss.peak_kb / 1024 if child else None,
            engine_cpu_s=engine_cpu,
            other_cpu_s=max(0.0, busy - ours),
            loop_lag=lag,
        )
        print(progress(cell), file=sys.stderr, flush=True)
        cells.append(cell)
    return cells


def _tag(part: str) -> str:
    return f"{part.replace(' ', '-')}-{time.monotonic_ns()}"


def _delta(after: dict[float, int], before: dict[float, int]) -> dict[float, int]:
    return {bound: count - before.get(bound, 0) for bound, count in after.items()}


def progress(cell: Cell) -> str:
    s = cell.summary
    return (
        f"  {cell.row:20} {cell.level:>5} streams: {s.started} started, {s.completed} done, "
        f"TTFT p99 {_num(s.ttft_p99_ms)} ms, gap p99 {_num(s.gap_p99_ms)} ms, "
        f"errors {sum(s.errors.values())}, engine got {cell.engine_received}"
    )


# -- the report (pure) ------------------------------------------------------------------------

HEADERS = (
    "server", "streams", "started", "done", "errors", "TTFT p50 ms", "TTFT p99 ms",
    "gap p50 ms", "gap p99 ms", "RSS MB", "CPU s", "client CPU s", "engine CPU s", "other CPU s",
    "engine got",
)  # fmt: skip


def report(cells: Sequence[Cell]) -> str:
    rows = [
        [
            c.row,
            c.level,
            c.summary.started,
            c.summary.completed,
            sum(c.summary.errors.values()),
            _num(c.summary.ttft_p50_ms),
            _num(c.summary.ttft_p99_ms),
            _num(c.summary.gap_p50_ms),
            _num(c.summary.gap_p99_ms),
            _num(c.server_peak_rss_mb),
            _num(c.server_cpu_s),
            _num(c.summary.client_cpu_s),
            _num(c.engine_cpu_s),
            _num(c.other_cpu_s),
            c.engine_received,
        ]
        for c in cells
    ]
    sections = [table(HEADERS, rows), error_lines(cells), ratio_lines(cells), lag_lines(cells)]
    return "\n\n".join(section for section in sections if section)


def error_lines(cells: Sequence[Cell]) -> str:
    return "\n".join(
        f"errors, {c.row} at {c.level}: {count} x {kind}"
        for c in cells
        for kind, count in c.summary.errors.items()
    )


def ratio_lines(cells: Sequence[Cell]) -> str:
    """Overspill's p99s against the floor's at each level, and whether it added errors."""
    found = {(c.row, c.level): c for c in cells}
    lines = []
    for (row, level), ours in found.items():
        floor = found.get((FLOOR, level))
        if not row.startswith("overspill") or floor is None:
            continue
        ttft = _ratio(ours.summary.ttft_p99_ms, floor.summary.ttft_p99_ms)
        gap = _ratio(ours.summary.gap_p99_ms, floor.summary.gap_p99_ms)
        added = sum(ours.summary.errors.values()) - sum(floor.summary.errors.values())
        met = ttft is not None and gap is not None and max(ttft, gap) <= GOAL and added <= 0
        lines.append(
            f"{row} vs {FLOOR} at {level}: TTFT p99 {_num(ttft)}x, gap p99 {_num(gap)}x, "
            f"errors added {max(added, 0)} ({'meets' if met else 'misses'} the goal: "
            f"<= {GOAL}x, none added)"
        )
    return "\n".join(lines)


def lag_lines(cells: Sequence[Cell]) -> str:
    lines = []
    for c in cells:
        if not c.loop_lag:
            continue
        total = max(c.loop_lag.values())
        over = {b: total - n for b, n in c.loop_lag.items() if b in (0.05, 0.1, 0.25, 1.0)}
        parts = ", ".join(f"{n} > {b * 1000:g} ms" for b, n in over.items())
        lines.append(f"event loop lag, {c.row} at {c.level}: {total} wake-ups, {parts}")
    return "\n".join(lines)


def _ratio(ours: float | None, floor: float | None) -> float | None:
    return ours / floor if ours is not None and floor else None


def _num(value: float | None) -> float | str:
    return "-" if value is None else round(value, 2)


def mismatches(cells: Sequence[Cell]) -> list[str]:
    return [c.mismatch for c in cells if c.mismatch]


# -- the plot ---------------------------------------------------------------------------------


def plot(cells: Sequence[Cell], levels: Sequence[int]) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels: tuple[tuple[str, Callable[[Cell], float | None]], ...] = (
        ("TTFT p99 (ms)", lambda c: c.summary.ttft_p99_ms),
        ("inter-token gap p99 (ms)", lambda c: c.summary.gap_p99_ms),
        ("streams with an error (%)", _error_share),
    )
    rows = list(dict.fromkeys(c.row for c in cells))
    fig, axes = plt.subplots(1, len(panels), figsize=(15, 4.5))
    width = 0.8 / len(rows)
    for ax, (title, value) in zip(axes, panels, strict=True):
        for i, row in enumerate(rows):
            ours = {c.level: value(c) for c in cells if c.row == row}
            xs = [j + (i - (len(rows) - 1) / 2) * width for j in range(len(levels))]
            ax.bar(xs, [ours.get(level) or 0.0 for level in levels], width, label=row)
        ax.set_xticks(range(len(levels)), [f"{level} streams" for level in levels])
        ax.set_ylim(0, max(ax.get_ylim()[1], 1.0))  # no errors: an empty panel from 0, not -0.04
        ax.set_title(title)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(rows), fontsize=9)
    fig.suptitle("Concurrent SSE streams: same simulator, one core for the server under test")
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    path = plot_path("streams")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _error_share(cell: Cell) -> float:
    started = cell.summary.started
    return 100 * (started - cell.summary.completed) / started if started else 0.0


# -- the command ------------------------------------------------------------------------------


def arguments(argv: Sequence[str] | None = None) -> argparse.Namespace:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--levels", type=_ints, default=(500, 1000, 2000))
    parser.add_argument("--rows", type=_rows, default=ROWS, help="comma-separated row names")
    parser.add_argument("--tokens", type=int, default=32, help="tokens per stream")
    parser.add_argument("--step-ms", type=float, default=300.0, help="engine step (token gap)")
    parser.add_argument("--seconds", type=float, default=15.0, help="load per cell")
    return parser.parse_args(argv)


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(","))


def _rows(text: str) -> tuple[str, ...]:
    rows = tuple(part.strip() for part in text.split(","))
    unknown = [row for row in rows if row not in ROWS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown rows {unknown}; rows are {', '.join(ROWS)}")
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    args = arguments(argv)
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the servers inherit it
    if hard < 2 * max(args.levels) + 1024:
        print(f"warning: RLIMIT_NOFILE hard limit {hard} is low", file=sys.stderr)
    cells: list[Cell] = []
    with simulator(args.step_ms, args.tokens) as engine:
        for row in args.rows:
            with server(row, engine.url) as child:
                cells += measure(row, child, child.url if child else engine.url, engine, args)
    print(report(cells))
    print(f"plot: {plot(cells, args.levels)}")
    wrong = mismatches(cells)
    if wrong:
        print("MISMATCH: what reached the engine is not what was sent:", file=sys.stderr)
        print("\n".join(wrong), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # the children have stopped on the way out
        sys.exit(130)
