"""What does the proxy cost? The same load, in one run, against four servers:

- direct:          the simulator itself (vllm personality, zero modelled latency);
- bare forwarder:  Starlette + aiohttp in a few lines (bench/bare_forwarder.py), the floor;
- overspill:       `overspill serve` with one backend, the simulator;
- litellm proxy:   `litellm --config ...` (LiteLLM's proxy, one worker) to the same simulator.

Non-streamed and streamed chat completions (8 output tokens) at concurrency 1, 16 and 64, by
wrk. Layout on 2 cores: the simulator and wrk share core 0, the server under test has core 1.
Reports added latency p50/p99 over direct, throughput, and the server's CPU time per request.

    .venv/bin/python -m bench.overhead [--seconds 5] [--skip-litellm]

LiteLLM is installed on first use into bench/.venv-litellm (pip install 'litellm[proxy]').
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.loadgen import BENCH_KEY, Load, cpu_seconds, wrk
from bench.report import plot_path, table
from proxy.children import Child, overspill_command, started

ROOT = Path(__file__).resolve().parent.parent
LITELLM_VENV = ROOT / "bench" / ".venv-litellm"
MODEL = "m"
LEVELS = (1, 16, 64)


def body(stream: bool) -> str:
    stream_part = ', "stream": true' if stream else ""
    return (
        '{"model": "m", "messages": [{"role": "user", "content": "Say hello"}], '
        f'"max_tokens": 8, "temperature": 0{stream_part}}}'
    )


def pinned(cpu: str, command: list[str]) -> list[str]:
    return ["taskset", "-c", cpu, *command]


@contextlib.contextmanager
def simulator() -> Iterator[Child]:
    zero = ("--decode-base-ms", "0", "--decode-per-seq-ms", "0", "--prefill-ms-per-token", "0")
    with started(
        pinned("0", overspill_command("sim", "--port", "0", "--model", MODEL, *zero))
    ) as c:
        yield c


@contextlib.contextmanager
def overspill(upstream: str) -> Iterator[Child]:
    config = (
        '[server]\nlog_level = "warning"\n[[backends]]\nname = "sim"\nkind = "vllm"\n'
        f'url = "{upstream}"\nmodels = ["{MODEL}"]\n'
    )
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "overspill.toml"
        path.write_text(config)
        command = overspill_command("serve", "--config", str(path), "--port", "0")
        with started(pinned("1", command)) as child:
            yield child


@contextlib.contextmanager
def bare(upstream: str) -> Iterator[Child]:
    command = [sys.executable, "-m", "bench.bare_forwarder", upstream]
    with started(pinned("1", command), cwd=str(ROOT)) as child:
        yield child


def ensure_litellm() -> Path:
    binary = LITELLM_VENV / "bin" / "litellm"
    if not binary.exists():
        print("installing litellm[proxy] into bench/.venv-litellm ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(LITELLM_VENV)], check=True)
        subprocess.run(
            [str(LITELLM_VENV / "bin" / "pip"), "install", "-q", "litellm[proxy]"], check=True
        )
    return binary


@contextlib.contextmanager
def litellm(upstream: str) -> Iterator[Child]:
    binary = ensure_litellm()
    port = _free_port()
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "litellm.yaml"
        config.write_text(
            f"model_list:\n  - model_name: {MODEL}\n    litellm_params:\n"
            f"      model: openai/{MODEL}\n      api_base: {upstream}/v1\n"
            "      api_key: unused\n"
        )
        command = [
            str(binary),
            "--config",
            str(config),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--num_workers",
            "1",
        ]
        env = {
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LITELLM_LOG": "ERROR",
            "LITELLM_MASTER_KEY": BENCH_KEY,
        }
        wrapper = [sys.executable, "-c", _ANNOUNCE.format(port=port), *pinned("1", command)]
        with started(wrapper, timeout=180, env={**os.environ, **env}) as child:
            yield child


# LiteLLM prints its URL before it is ready: announce it only once it answers.
_ANNOUNCE = """
import subprocess, sys, time, urllib.request
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
while True:
    try:
        urllib.request.urlopen("http://127.0.0.1:{port}/health/liveliness", timeout=1)
        break
    except Exception:
        if proc.poll() is not None:
            sys.exit("litellm exited")
        time.sleep(0.5)
print("litellm ready on http://127.0.0.1:{port}", flush=True)
sys.exit(proc.wait())
"""


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class Cell:
    server: str
    stream: bool
    concurrency: int
    load: Load
    cpu_ms_per_request: float | None


def measure(server: str, child: Child | None, url: str, seconds: int) -> list[Cell]:
    endpoint = url + "/v1/chat/completions"
    headers = {"content-type": "application/json", "authorization": f"Bearer {BENCH_KEY}"}
    httpx.post(endpoint, content=body(False), headers=headers, timeout=60).raise_for_status()
    wrk(endpoint, body(False), 8, 1)  # warm up
    cells = []
    for stream in (False, True):
        for concurrency in LEVELS:
            before = cpu_seconds(child.popen.pid) if child else 0.0
            load = wrk(endpoint, body(stream), concurrency, seconds)
            cpu = (cpu_seconds(child.popen.pid) - before) if child else None
            per_request = cpu / load.requests * 1000 if cpu is not None and load.requests else None
            cells.append(Cell(server, stream, concurrency, load, per_request))
            print(
                f"  {server:15} stream={stream!s:5} c={concurrency:<3} {load.rps:8.0f} req/s "
                f"p50 {load.p50_ms:.2f} ms p99 {load.p99_ms:.2f} ms errors {load.errors}",
                file=sys.stderr,
            )
    return cells


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--skip-litellm", action="store_true")
    args = parser.parse_args()
    cells: list[Cell] = []
    with simulator() as sim:
        cells += measure("direct", None, sim.url, args.seconds)
        with bare(sim.url) as forwarder:
            cells += measure("bare forwarder", forwarder, forwarder.url, args.seconds)
        with overspill(sim.url) as proxy:
            cells += measure("overspill", proxy, proxy.url, args.seconds)
        if not args.skip_litellm:
            with litellm(sim.url) as lite:
                time.sleep(1)
                cells += measure("litellm proxy", lite, lite.url, args.seconds)
    print(report(cells))
    plot(cells)
    return 0


def report(cells: list[Cell]) -> str:
    direct = {(c.stream, c.concurrency): c.load for c in cells if c.server == "direct"}
    rows = []
    for c in cells:
        base = direct[(c.stream, c.concurrency)]
        added50 = c.load.p50_ms - base.p50_ms if c.server != "direct" else 0.0
        added99 = c.load.p99_ms - base.p99_ms if c.server != "direct" else 0.0
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
        "errors",
    ]
    lines = [table(headers, rows), "", ratios(cells)]
    return "\n".join(lines)


def ratios(cells: list[Cell]) -> str:
    def cell(server: str, stream: bool, concurrency: int) -> Cell | None:
        return next(
            (
                c
                for c in cells
                if (c.server, c.stream, c.concurrency) == (server, stream, concurrency)
            ),
            None,
        )

    lines = []
    for stream in (False, True):
        mode = "streamed" if stream else "non-streamed"
        ours, floor = cell("overspill", stream, 16), cell("bare forwarder", stream, 16)
        if ours and floor and ours.cpu_ms_per_request and floor.cpu_ms_per_request:
            ratio = ours.cpu_ms_per_request / floor.cpu_ms_per_request
            lines.append(f"{mode}: overspill CPU/request = {ratio:.2f}x bare forwarder (c=16)")
        ours64, lite64 = cell("overspill", stream, 64), cell("litellm proxy", stream, 64)
        if ours64 and lite64 and lite64.load.rps:
            ratio = ours64.load.rps / lite64.load.rps
            lines.append(f"{mode}: overspill throughput = {ratio:.1f}x litellm proxy (c=64)")
        one = cell("overspill", stream, 1)
        direct = cell("direct", stream, 1)
        if one and direct:
            added = one.load.p50_ms - direct.load.p50_ms
            lines.append(f"{mode}: overspill added p50 at c=1 = {added:.2f} ms")
    return "\n".join(lines)


def plot(cells: list[Cell]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    servers = list(dict.fromkeys(c.server for c in cells))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
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
