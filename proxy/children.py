"""Child processes that print their URL on their first line: the demo's simulators, and tests'.

`started(command)` waits for that line and stops the child on exit (SIGTERM, then SIGKILL);
`started_all(commands)` starts several at once. On Linux a child also dies with its parent
(PR_SET_PDEATHSIG), so a killed proxy leaves no orphans. Each child has its own process group:
the Ctrl-C a terminal sends to its foreground group reaches the parent alone, which stops its
children once it has finished what was in flight (they would otherwise die under it).
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
    closed: threading.Event = field(default_factory=threading.Event)  # its output has ended

    def stop(self) -> None:
        self.terminate()
        self.reap()

    def terminate(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)

    def reap(self) -> None:
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
    with started_all({"": command}, timeout, env, cwd) as children:
        yield children[""]


@contextlib.contextmanager
def started_all(
    commands: dict[str, list[str]],
    timeout: float = 30.0,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
) -> Iterator[dict[str, Child]]:
    """Start every command at once (their start-ups overlap), wait for each one's URL, and stop
    them all together on exit."""
    children: dict[str, Child] = {}
    try:
        waits = {name: _spawn(command, env, cwd) for name, command in commands.items()}
        children.update((name, child) for name, (child, _) in waits.items())
        deadline = time.monotonic() + timeout
        for name, (child, found) in waits.items():
            _await_url(commands[name], child, found, deadline)
        yield children
    finally:
        for child in children.values():
            child.terminate()
        for child in children.values():
            child.reap()


def _spawn(
    command: list[str], env: dict[str, str] | None, cwd: str | None
) -> tuple[Child, threading.Event]:
    popen = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        process_group=0,
        preexec_fn=die_with_parent,  # async-signal-safe: one prctl call
    )
    child = Child(popen, "", [])
    found = threading.Event()
    threading.Thread(target=_pump, args=(child, found), daemon=True).start()
    return child, found


def _await_url(command: list[str], child: Child, found: threading.Event, deadline: float) -> None:
    while not found.wait(0.05):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{command} printed no URL in time: {''.join(child.output)}")
    if not child.url:
        child.popen.wait(timeout=5)
        code = child.popen.returncode
        raise RuntimeError(f"{command} exited with {code}: {''.join(child.output)}")


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
    child.closed.set()
