"""What hostile clients can grow: the proxy's memory under requests that invent names.

Through the real proxy in front of one vLLM-like simulator, three phases, each --count requests
(default 10,000) on --clients connections at once, the proxy's RSS read from /proc before and
after and every --count/20 requests:
  1. models:  each body names a different 3 MB model (refused with a 400 before any bookkeeping);
  2. tenants: each request names a different tenant no policy declares (answered, cached at
     temperature 0: invented names share the anonymous scope);
  3. unknown: each request names a different short unknown model (404, counted as "other").
Reported: RSS at start and end of each phase, its peak, the statuses seen, the size of
/admin/traffic, and the number of requests the engine received (phase 2 only should reach it).
The bound stated in docs/security.md is checked: RSS growth over a phase under --bound-mb.

    .venv/bin/python -m bench.abuse [--count 10000] [--clients 8] [--bound-mb 64]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import orjson

from bench.report import plot_path, table
from proxy.children import Child, overspill_command, started

POLICY = """
[server]
probe_interval_s = 0.5
log_level = "warning"
[cache]
semantic = false
[[backends]]
name = "local"
kind = "vllm"
url = "{engine}"
models = ["m"]
[[tenants]]
name = "acme"
"""
NAME_BYTES = 3 * 1024 * 1024


@dataclass
class Phase:
    name: str
    rss_kib: list[tuple[int, int]] = field(default_factory=list)  # (requests sent, RSS)
    statuses: Counter[int] = field(default_factory=Counter)
    reached_engine: int = 0
    traffic_bytes: int = 0


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def model_body(n: int) -> tuple[bytes, dict[str, str]]:
    name = f"{n:06d}-{uuid.uuid4().hex}".ljust(NAME_BYTES, "m")
    return orjson.dumps({"model": name, "messages": [{"role": "user", "content": "hi"}]}), {}


def tenant_body(n: int) -> tuple[bytes, dict[str, str]]:
    body = {
        "model": "m",
        "temperature": 0,
        "max_tokens": 2,
        "messages": [{"role": "user", "content": f"question {n}"}],
    }
    return orjson.dumps(body), {"x-overspill-tenant": f"invented-{n}-{uuid.uuid4().hex}"}


def unknown_body(n: int) -> tuple[bytes, dict[str, str]]:
    body = {
        "model": f"no-such-model-{n}-{uuid.uuid4().hex}",
        "messages": [{"role": "user", "content": "hi"}],
    }
    return orjson.dumps(body), {}


async def run_phase(
    proxy: Child,
    engine: Child,
    phase: Phase,
    make: Callable[[int], tuple[bytes, dict[str, str]]],
    count: int,
    clients: int,
) -> None:
    pid = proxy.popen.pid
    every = max(1, count // 20)
    sent = 0
    async with aiohttp.ClientSession() as session:
        before = await _engine_requests(session, engine)
        phase.rss_kib.append((0, rss_kib(pid)))

        async def client() -> None:
            nonlocal sent
            while sent < count:
                n = sent
                sent += 1
                body, headers = make(n)
                async with session.post(
                    proxy.url + "/v1/chat/completions",
                    data=body,
                    headers={"content-type": "application/json", **headers},
                ) as response:
                    await response.read()
                    phase.statuses[response.status] += 1
                if (n + 1) % every == 0:
                    phase.rss_kib.append((n + 1, rss_kib(pid)))

        await asyncio.gather(*(client() for _ in range(clients)))
        phase.rss_kib.append((count, rss_kib(pid)))
        phase.reached_engine = await _engine_requests(session, engine) - before
        async with session.get(proxy.url + "/admin/traffic") as response:
            phase.traffic_bytes = len(await response.read())


async def _engine_requests(session: aiohttp.ClientSession, engine: Child) -> int:
    async with session.get(engine.url + "/_sim/stats") as response:
        return int((await response.json())["requests"])


def report(phases: list[Phase], bound_mb: float) -> bool:
    rows, ok = [], True
    for phase in phases:
        start, end = phase.rss_kib[0][1], phase.rss_kib[-1][1]
        peak = max(rss for _, rss in phase.rss_kib)
        growth = (end - start) / 1024
        ok = ok and growth < bound_mb
        statuses = ", ".join(f"{code}: {n:,}" for code, n in sorted(phase.statuses.items()))
        rows.append(
            [
                phase.name,
                sum(phase.statuses.values()),
                statuses,
                phase.reached_engine,
                start / 1024,
                end / 1024,
                peak / 1024,
                growth,
                phase.traffic_bytes / 1024,
            ]
        )
    print(
        table(
            [
                "phase",
                "requests",
                "statuses",
                "reached engine",
                "RSS start MB",
                "RSS end MB",
                "RSS peak MB",
                "growth MB",
                "/admin/traffic KB",
            ],
            rows,
        )
    )
    print(f"\nbound: growth under {bound_mb:g} MB per phase: {'met' if ok else 'NOT MET'}")
    return ok


def plot(phases: list[Phase]) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4))
    for phase in phases:
        axis.plot(
            [n for n, _ in phase.rss_kib],
            [r / 1024 for _, r in phase.rss_kib],
            marker=".",
            label=phase.name,
        )
    axis.set_xlabel("requests sent in the phase")
    axis.set_ylabel("proxy RSS (MB)")
    axis.set_ylim(bottom=0)
    axis.set_title("Proxy memory under invented names")
    axis.legend()
    path = plot_path("abuse")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.abuse", description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--bound-mb", type=float, default=64.0)
    args = parser.parse_args(argv)
    engine_command = overspill_command(
        "sim", "--port", "0", "--model", "m", "--decode-base-ms", "1", "--output-tokens", "2"
    )
    with started(engine_command) as engine, tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "overspill.toml"
        path.write_text(POLICY.format(engine=engine.url))
        with started(overspill_command("serve", "--config", str(path), "--port", "0")) as proxy:
            phases = []
            for name, make in (
                ("models", model_body),
                ("tenants", tenant_body),
                ("unknown", unknown_body),
            ):
                phase = Phase(f"{name}")
                print(f"phase {name}: {args.count:,} requests...", file=sys.stderr, flush=True)
                asyncio.run(run_phase(proxy, engine, phase, make, args.count, args.clients))
                phases.append(phase)
    ok = report(phases, args.bound_mb)
    print(f"plot: {plot(phases)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
