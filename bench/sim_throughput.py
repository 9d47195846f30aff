"""How fast is `overspill sim` itself? It must never be the bottleneck of a proxy benchmark.

Runs in one go, side by side: a bare Starlette app (the ceiling for any Starlette server here)
and the simulator with zero modelled latency (vllm personality), both pinned to one core with
uvicorn + uvloop + httptools, loaded by wrk pinned to the other core. Short non-streamed chat
completions (4 output tokens) at several connection counts. Prints a table, saves a PNG.

    .venv/bin/python -m bench.sim_throughput [--seconds 5]

Needs `wrk` (Debian: apt-get install wrk) and `taskset` (util-linux).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.report import plot_path, table
from tests.processes import overspill_command, running

CHAT = (
    '{"model":"m","messages":[{"role":"user","content":"Say hello"}],'
    '"max_tokens":4,"temperature":0}'
)
BARE_APP = """
import uvicorn
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route
BODY = b'{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":" hello there you"},"finish_reason":"length"}]}'
async def chat(request):
    await request.body()
    return Response(BODY, media_type="application/json")
app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
import socket
sock = socket.socket()
sock.bind(("127.0.0.1", 0))
sock.listen(2048)
print("bare starlette listening on http://127.0.0.1:%d" % sock.getsockname()[1], flush=True)
config = uvicorn.Config(app, loop="uvloop", http="httptools", log_level="warning",
                        access_log=False)
uvicorn.Server(config).run(sockets=[sock])
"""  # noqa: E501


def wrk(url: str, connections: int, seconds: int, script: Path) -> tuple[float, float, float]:
    """Requests per second, p50 and p99 latency in ms."""
    out = subprocess.run(
        [
            "taskset",
            "-c",
            "1",
            "wrk",
            "-t1",
            f"-c{connections}",
            f"-d{seconds}s",
            "--latency",
            "-s",
            str(script),
            url + "/v1/chat/completions",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    return rps, _latency(out, "50%"), _latency(out, "99%")


def _latency(out: str, pct: str) -> float:
    value, unit = re.search(rf"{pct}\s+([\d.]+)(us|ms|s)", out).groups()  # type: ignore[union-attr]
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--connections", default="1,16,64")
    args = parser.parse_args()
    if not shutil.which("wrk") or not shutil.which("taskset"):
        print("needs wrk and taskset (apt-get install wrk util-linux)", file=sys.stderr)
        return 2
    levels = [int(c) for c in args.connections.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "post.lua"
        script.write_text(
            f"wrk.method = 'POST'\nwrk.body = '{CHAT}'\n"
            "wrk.headers['Content-Type'] = 'application/json'\n"
        )
        bare = ["taskset", "-c", "0", sys.executable, "-c", BARE_APP]
        sim = [
            "taskset",
            "-c",
            "0",
            *overspill_command(
                "sim",
                "--port",
                "0",
                "--model",
                "m",
                "--decode-base-ms",
                "0",
                "--decode-per-seq-ms",
                "0",
                "--prefill-ms-per-token",
                "0",
            ),
        ]
        results: dict[str, list[tuple[float, float, float]]] = {}
        for name, command in (("bare Starlette", bare), ("overspill sim", sim)):
            with running(command) as process:
                wrk(process.url, 16, 1, script)  # warm up
                results[name] = [wrk(process.url, c, args.seconds, script) for c in levels]
    rows = []
    for i, connections in enumerate(levels):
        bare_rps = results["bare Starlette"][i][0]
        for name, series in results.items():
            rps, p50, p99 = series[i]
            rows.append([connections, name, rps, p50, p99, rps / bare_rps])
    print(table(["connections", "server (1 core)", "req/s", "p50 ms", "p99 ms", "vs bare"], rows))
    _plot(levels, results)
    return 0


def _plot(levels: list[int], results: dict[str, list[tuple[float, float, float]]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    width = 0.38
    for offset, (name, series) in enumerate(results.items()):
        xs = [i + (offset - 0.5) * width for i in range(len(levels))]
        ax.bar(xs, [s[0] for s in series], width, label=name)
    ax.axhline(3000, color="red", linestyle="--", linewidth=1, label="target: 3,000 req/s")
    ax.set_xticks(range(len(levels)), [f"{c} conns" for c in levels])
    ax.set_ylabel("non-streamed requests/s (1 core)")
    ax.set_title("Simulator throughput, zero modelled latency")
    ax.legend()
    fig.tight_layout()
    path = plot_path("sim_throughput")
    fig.savefig(path, dpi=120)
    print(f"plot: {path}")


if __name__ == "__main__":
    sys.exit(main())
