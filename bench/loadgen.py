"""wrk as the load generator, and the CPU time a server process (and its children) spent."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")
# Sent with every request; LiteLLM's proxy refuses to start without a master key.
BENCH_KEY = "sk-overspill-bench-0123456789abcdef0123456789abcdef"


@dataclass(frozen=True)
class Load:
    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    errors: int

    @property
    def rps(self) -> float:
        return self.requests / self.seconds


# A distinct body's words: "@N@" in a body becomes a tag, a counter and three of these, so no
# two requests of a run are alike (nor similar enough for a semantic hit).
_WORDS = (
    "river atlas copper lantern meadow orbit violet harbor quartz ember willow falcon cedar "
    "glacier saffron tundra maple comet basalt juniper canyon marble zephyr thistle cobalt "
    "prairie nectar summit walnut lagoon"
).split()


def wrk(
    url: str, body: str, connections: int, seconds: int, cpu: str = "0", distinct: str = ""
) -> Load:
    """POST `body` to `url` with `connections` closed-loop connections for `seconds`. With
    `distinct` (a tag no other run uses), each request's "@N@" becomes the tag, a counter and
    three words: every body differs."""
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed: scripts/bench-tools installs it (Debian's)")
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "post.lua"
        script.write_text(
            "wrk.method = 'POST'\n"
            f"wrk.body = [[{body}]]\n"
            "wrk.headers['Content-Type'] = 'application/json'\n"
            f"wrk.headers['Authorization'] = 'Bearer {BENCH_KEY}'\n"
            + (_distinct_bodies(body, distinct) if distinct else "")
        )
        out = subprocess.run(
            [
                "taskset",
                "-c",
                cpu,
                "wrk",
                "-t1",
                f"-c{connections}",
                f"-d{seconds}s",
                "--latency",
                "--timeout",
                "30s",
                "-s",
                str(script),
                url,
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    requests = int(re.search(r"(\d+) requests in ([\d.]+)(m?s)", out).group(1))  # type: ignore[union-attr]
    duration = re.search(r"requests in ([\d.]+)(ms|s|m)", out)
    assert duration is not None
    secs = float(duration.group(1)) * {"ms": 0.001, "s": 1.0, "m": 60.0}[duration.group(2)]
    errors = sum(int(n) for n in re.findall(r"(?:connect|read|write|timeout) (\d+)", out))
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors += int(non_2xx.group(1)) if non_2xx else 0
    return Load(requests, secs, _latency(out, "50%"), _latency(out, "99%"), errors)


def _distinct_bodies(body: str, tag: str) -> str:
    words = ", ".join(f'"{word}"' for word in _WORDS)
    return (
        f"local words = {{{words}}}\n"
        "local n = 0\n"
        f"local template = [[{body}]]\n"
        "request = function()\n"
        "  n = n + 1\n"
        f"  local text = '{tag} ' .. n .. ' ' .. words[math.random(#words)] .. ' '"
        " .. words[math.random(#words)] .. ' ' .. words[math.random(#words)]\n"
        "  return wrk.format(nil, nil, nil, (string.gsub(template, '@N@', text)))\n"
        "end\n"
    )


def _latency(out: str, pct: str) -> float:
    match = re.search(rf"{pct}\s+([\d.]+)(us|ms|s)", out)
    assert match is not None, out
    return float(match.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[match.group(2)]


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and all its descendants, alive or reaped."""
    total = 0.0
    for child in [pid, *_descendants(pid)]:
        try:
            fields = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        # utime, stime, cutime, cstime: fields 14-17 of stat (index 11-14 after the name)
        total += sum(int(v) for v in fields[11:15]) / _TICKS
    return total


def _descendants(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True)
    children = [int(p) for p in out.stdout.split()]
    return children + [d for c in children for d in _descendants(c)]
