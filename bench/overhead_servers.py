"""The servers bench/overhead.py measures, each started as a child process that stops with the
bench: the simulators (and what they received), Overspill configured per row, the bare forwarder,
LiteLLM's proxy (installed on first use into bench/.venv-litellm); and the request bodies."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from bench.loadgen import BENCH_KEY
from proxy.children import Child, overspill_command, started

ROOT = Path(__file__).resolve().parent.parent
LITELLM_VENV = ROOT / "bench" / ".venv-litellm"
MODEL = "m"
LEVELS = (1, 16, 64)


def body(stream: bool, distinct: bool, tokens: int = 8) -> str:
    """A chat request for `tokens` output tokens; a distinct one carries "@N@" where wrk writes
    each request's own words."""
    stream_part = ', "stream": true' if stream else ""
    content = "Tell me about @N@" if distinct else "Say hello"
    return (
        f'{{"model": "m", "messages": [{{"role": "user", "content": "{content}"}}], '
        f'"max_tokens": {tokens}, "temperature": 0{stream_part}}}'
    )


def pinned(cpu: str, command: list[str]) -> list[str]:
    return ["taskset", "-c", cpu, *command]


_ZERO = ("--decode-base-ms", "0", "--decode-per-seq-ms", "0", "--prefill-ms-per-token", "0")


@contextlib.contextmanager
def simulator(personality: str = "vllm", tokens: int = 8) -> Iterator[Child]:
    """A simulator that answers every request with exactly `tokens` tokens, at once."""
    fixed = ("--output-tokens", str(tokens), "--output-distribution", "fixed")
    command = overspill_command(
        "sim", "--port", "0", "--model", MODEL, "--personality", personality, *_ZERO, *fixed
    )
    if personality == "cloud":  # no modelled network, and no log growing for the whole run
        command += ["--network-latency-ms", "0", "--no-record"]
    with started(pinned("0", command)) as c:
        yield c


def received(engine: Child) -> int:
    """Requests the simulator has received so far."""
    count: int = httpx.get(engine.url + "/_sim/stats", timeout=10).json()["requests"]
    return count


def settled(engine: Child, quiet_s: float = 0.5, limit_s: float = 30.0) -> int:
    """What the simulator has received once nothing more arrives for `quiet_s`: requests a
    server still held when wrk stopped reach it late, and belong to the cell that sent them."""
    count, deadline = received(engine), time.monotonic() + limit_s
    while time.monotonic() < deadline:
        time.sleep(quiet_s)
        now = received(engine)
        if now == count:
            return count
        count = now
    return count


_BACKEND = '[[backends]]\nname = "sim"\nkind = "vllm"\nurl = "{url}"\nmodels = ["{model}"]\n'
# What each overspill row configures besides its backend (or its cloud).
OVERSPILL_ROWS = {
    "forwarding": "[cache]\nenabled = false\ncoalesce = false\n",
    "exact hit": "[cache]\nenabled = true\nsemantic = false\n",
    "semantic miss": "[cache]\nenabled = true\nsemantic = true\n",
}


def overspill_config(row: str, upstream: str) -> str:
    head = '[server]\nlog_level = "warning"\n'
    if row == "forwarding (a cloud idle)":  # litellm loaded, never used: must cost nothing
        idle_cloud = '[[clouds]]\nname = "idle"\nmodel = "openai/gpt-4o-mini"\n'
        return (
            head
            + OVERSPILL_ROWS["forwarding"]
            + _BACKEND.format(url=upstream, model=MODEL)
            + idle_cloud
        )
    if row.startswith("cloud leg"):  # model "m" has no local backend: its route's cloud
        wire = 'wire = "openai"\n' if row.endswith("(openai wire)") else 'wire = "litellm"\n'
        return (
            head
            + "[cache]\nenabled = false\n"
            + _BACKEND.format(url=upstream, model="unused")
            + f'[[clouds]]\nname = "cloud"\nmodel = "openai/{MODEL}"\n'
            + f'api_base = "{upstream}/v1"\n{wire}'
            + f'[[routes]]\nmodel = "{MODEL}"\ncloud = ["cloud"]\n'
        )
    return head + OVERSPILL_ROWS[row] + _BACKEND.format(url=upstream, model=MODEL)


@contextlib.contextmanager
def overspill(row: str, upstream: str) -> Iterator[Child]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "overspill.toml"
        path.write_text(overspill_config(row, upstream))
        command = overspill_command("serve", "--config", str(path), "--port", "0")
        with started(pinned("1", command), env={**os.environ, "OPENAI_API_KEY": "unused"}) as c:
            yield c


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


# LiteLLM prints its URL before it is ready: announce it only once it answers. The wrapper
# passes its own end on to LiteLLM (a SIGTERM to the wrapper alone left LiteLLM running).
_ANNOUNCE = """
import signal, subprocess, sys, time, urllib.request
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
def end(signum, frame):
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
    sys.exit(0)
signal.signal(signal.SIGTERM, end)
signal.signal(signal.SIGINT, end)
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
