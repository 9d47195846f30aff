"""Start Overspill's own commands as real processes on free 127.0.0.1 ports, for tests and benches.

A process prints its URL on the first line of output (`--port 0` binds a free port race-free);
`running(...)` waits for that line, yields the process, and stops it (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

_URL = re.compile(r"(http://127\.0\.0\.1:\d+)")
ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Process:
    popen: subprocess.Popen[str]
    url: str
    output: list[str] = field(default_factory=list)

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=5)


def overspill_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "proxy.cli", *args]


@contextlib.contextmanager
def running(
    command: list[str], timeout: float = 30.0, env: dict[str, str] | None = None
) -> Iterator[Process]:
    popen = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )
    output: list[str] = []
    found = threading.Event()
    url: list[str] = []

    def pump() -> None:
        assert popen.stdout is not None
        for line in popen.stdout:
            output.append(line)
            match = _URL.search(line)
            if match and not url:
                url.append(match.group(1))
                found.set()
        found.set()

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + timeout
    while not found.wait(0.05):
        if time.monotonic() > deadline:
            popen.kill()
            raise TimeoutError(f"{command} printed no URL in {timeout}s: {''.join(output)}")
    if not url:
        popen.wait(timeout=5)
        raise RuntimeError(f"{command} exited with {popen.returncode}: {''.join(output)}")
    process = Process(popen, url[0], output)
    try:
        yield process
    finally:
        process.stop()


def sim(*args: str) -> contextlib.AbstractContextManager[Process]:
    """`overspill sim --port 0 ARGS...` as a running process."""
    return running(overspill_command("sim", "--port", "0", *args))


# Simulator timings used by most tests: fast enough for a 2-core CI, slow enough to measure.
FAST_ENGINE = (
    "--decode-base-ms",
    "2",
    "--decode-per-seq-ms",
    "0.1",
    "--prefill-ms-per-token",
    "0.01",
)
