"""Child processes that print their URL on their first line: the demo's simulators, and tests'.

`started(command)` waits for that line and stops the child on exit (SIGTERM, then SIGKILL). On
Linux a child also dies with its parent (PR_SET_PDEATHSIG), so a killed proxy leaves no orphans.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

# "listening on URL" / "ready on URL": the line that says the server accepts connections (a child
# engine may log its URL earlier, before it does).
_URL = re.compile(r"(?:listening|ready) on (http://127\.0\.0\.1:\d+)")
_PR_SET_PDEATHSIG = 1


@dataclass
class Child:
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


def die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


@contextlib.contextmanager
def started(
    command: list[str],
    timeout: float = 30.0,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
) -> Iterator[Child]:
    popen = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        preexec_fn=die_with_parent,  # async-signal-safe: one prctl call
    )
    child = Child(popen, "", [])
    found = threading.Event()
    threading.Thread(target=_pump, args=(child, found), daemon=True).start()
    deadline = time.monotonic() + timeout
    while not found.wait(0.05):
        if time.monotonic() > deadline:
            popen.kill()
            raise TimeoutError(f"{command} printed no URL in {timeout}s: {''.join(child.output)}")
    try:
        if not child.url:
            popen.wait(timeout=5)
            raise RuntimeError(f"{command} exited with {popen.returncode}: {''.join(child.output)}")
        yield child
    finally:
        child.stop()


def _pump(child: Child, found: threading.Event) -> None:
    """Keep reading the child's output (so it never blocks on a full pipe); note its URL."""
    assert child.popen.stdout is not None
    for line in child.popen.stdout:
        child.output.append(line)
        if len(child.output) > 1000:
            del child.output[:500]
        match = _URL.search(line)
        if match and not child.url:
            child.url = match.group(1)
            found.set()
    found.set()
