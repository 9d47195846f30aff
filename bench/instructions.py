"""Instructions per forwarded request, Overspill against the bare forwarder, counted by callgrind.

    .venv/bin/python -m bench.instructions [--requests 600] [--stream] [--tree DIR ...]

CPU time on these machines varies by up to 2x from hour to hour, and a change worth 5% drowns
in it; the instructions a process executes do not vary (valgrind runs it on a simulated CPU,
every instruction counted). Each server runs under `valgrind --tool=callgrind` in front of a
simulator (zero modelled latency, 8-token answers), takes 200 warm-up requests, then N more at
concurrency 16 (distinct bodies, cache and coalescing off, as bench/overhead.py's forwarding
row), and exits; the same server with no request past the warm-up gives what start-up and the
warm-up cost, and the difference over N is what one request costs. `--tree DIR` measures
another checkout of this repository beside the working tree (e.g. `git worktree add /tmp/base
HEAD~3`): an A/B in instructions. The engine must have received every request sent.

Instructions are not time (a cache miss costs more than an add), but where the code that runs
is the same (this machine, this Python), fewer instructions is less CPU. Under valgrind a
request takes ~50x longer: a few minutes in all. Needs valgrind (scripts/bench-tools).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from bench.overhead_servers import body, overspill_config, received, settled, simulator
from bench.report import plot_path, table
from proxy.children import Child, started

ROOT = Path(__file__).resolve().parents[1]
WARM_UP = 200
CONCURRENCY = 16
JSON = {"content-type": "application/json"}


@dataclass(frozen=True)
class Server:
    name: str
    tree: Path  # the checkout it runs from

    def command(self, engine: str, config: Path, profile: Path) -> list[str]:
        valgrind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={profile}"]
        if self.name == "bare forwarder":
            return [*valgrind, sys.executable, "-m", "bench.bare_forwarder", engine]
        config.write_text(overspill_config("forwarding", engine))
        serve = ["-m", "proxy.cli", "serve", "--config", str(config), "--port", "0"]
        return [*valgrind, sys.executable, *serve]


async def send(url: str, count: int, tag: str, stream: bool) -> None:
    """`count` distinct requests, `CONCURRENCY` at a time; every one must be answered 200."""
    template = body(stream, True)
    gate = asyncio.Semaphore(CONCURRENCY)
    async with aiohttp.ClientSession() as session:

        async def one(index: int) -> None:
            data = template.replace("@N@", f"{tag} {index}")
            async with gate, session.post(url, data=data, headers=JSON) as response:
                await response.read()
                if response.status != 200:
                    raise RuntimeError(f"{url}: {response.status}")

        await asyncio.gather(*(one(i) for i in range(count)))


def instructions(server: Server, engine: Child, requests: int, stream: bool) -> int:
    """What the server executed in all, from its start to its exit, having answered the
    warm-up and `requests` more; checks that the engine received every one."""
    with tempfile.TemporaryDirectory() as folder:
        profile = Path(folder) / "callgrind.out"
        command = server.command(engine.url, Path(folder) / "overspill.toml", profile)
        before = received(engine)
        env = {**os.environ, "OPENAI_API_KEY": "unused"}
        with started(command, timeout=600, env=env, cwd=str(server.tree)) as child:
            url = child.url + "/v1/chat/completions"
            asyncio.run(send(url, WARM_UP, "warm", stream))
            if requests:
                asyncio.run(send(url, requests, "measured", stream))
        got = settled(engine) - before
        if got != WARM_UP + requests:
            raise RuntimeError(f"{server.name}: the engine got {got}, not {WARM_UP + requests}")
        return _total(profile)


def _total(profile: Path) -> int:
    """The profile's event total (callgrind writes `totals:` or `summary:` at its end)."""
    for line in profile.read_text(errors="replace").splitlines():
        if line.startswith(("totals:", "summary:")):
            return int(line.split()[1])
    raise RuntimeError(f"{profile}: no totals (did the server exit normally?)")


def per_request(server: Server, engine: Child, requests: int, stream: bool) -> float:
    with_requests = instructions(server, engine, requests, stream)
    without = instructions(server, engine, 0, stream)
    return (with_requests - without) / requests


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=600)
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--tree", type=Path, action="append", default=[])
    args = parser.parse_args()
    servers = [Server("bare forwarder", ROOT), Server("overspill", ROOT)]
    servers += [Server(f"overspill ({tree})", tree.resolve()) for tree in args.tree]
    costs: dict[str, float] = {}
    with simulator() as engine:
        for server in servers:
            costs[server.name] = per_request(server, engine, args.requests, args.stream)
            print(f"  {server.name}: {costs[server.name] / 1e3:,.0f}k", file=sys.stderr)
    floor = costs["bare forwarder"]
    mode = "streamed" if args.stream else "whole"
    rows = [[name, mode, cost / 1e3, cost / floor] for name, cost in costs.items()]
    print(table(["server", "answer", "k instructions/request", "x bare forwarder"], rows))
    plot(costs, mode)
    return 0


def plot(costs: dict[str, float], mode: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.5))
    names = list(costs)
    ax.barh(names, [costs[name] / 1e3 for name in names])
    ax.set_xlabel("thousand instructions per request (callgrind)")
    ax.set_title(f"Instructions per forwarded request ({mode} answers, c={CONCURRENCY})")
    ax.invert_yaxis()
    fig.tight_layout()
    path = plot_path(f"instructions-{mode}")
    fig.savefig(path, dpi=120)
    print(f"plot: {path}")


if __name__ == "__main__":
    sys.exit(main())
