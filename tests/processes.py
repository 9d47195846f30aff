"""Start Overspill's own commands as real processes on free 127.0.0.1 ports, for tests and benches.

Every command prints its URL on the first line (`--port 0` binds a free port race-free);
`running(...)` waits for that line, yields the process, and stops it afterwards.
"""

from __future__ import annotations

import contextlib
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx

from proxy.children import Child, overspill_command, started

ROOT = Path(__file__).resolve().parent.parent
Process = Child

# The key the test policies' cloud targets read (api_key_env = "TEST_CLOUD_KEY").
TEST_CLOUD_KEY = "sk-test-cloud-key-5678"


def engine_flags(**flags: object) -> tuple[str, ...]:
    """`overspill sim` flags from keywords: engine_flags(max_seqs=1) == ("--max-seqs", "1")."""
    return tuple(part for k, v in flags.items() for part in (f"--{k.replace('_', '-')}", str(v)))


# Simulator timings used by most tests: fast enough for a 2-core CI, slow enough to measure.
FAST_ENGINE = engine_flags(decode_base_ms=2, decode_per_seq_ms=0.1, prefill_ms_per_token=0.01)


@contextlib.contextmanager
def running(
    command: list[str], timeout: float = 30.0, env: dict[str, str] | None = None
) -> Iterator[Child]:
    with started(command, timeout, env, cwd=str(ROOT)) as child:
        yield child


def sim(*args: str) -> contextlib.AbstractContextManager[Child]:
    """`overspill sim --port 0 ARGS...` as a running process."""
    return running(overspill_command("sim", "--port", "0", *args))


__all__ = [
    "FAST_ENGINE",
    "ROOT",
    "Process",
    "alive",
    "backend_toml",
    "child_pids",
    "cloud_toml",
    "demo",
    "demo_config_path",
    "overspill_command",
    "proxy",
    "running",
    "sim",
]


def backend_toml(name: str, kind: str, url: str, models: dict[str, str] | None = None) -> str:
    lines = ["[[backends]]", f'name = "{name}"', f'kind = "{kind}"', f'url = "{url}"']
    if models is not None:
        lines.append("models = { " + ", ".join(f'"{k}" = "{v}"' for k, v in models.items()) + " }")
    return "\n".join(lines) + "\n"


def cloud_toml(name: str, url: str, model: str = "openai/gpt-4o-mini") -> str:
    """A cloud target reached through litellm at a cloud-personality simulator (`url`)."""
    return (
        f'[[clouds]]\nname = "{name}"\nmodel = "{model}"\napi_base = "{url}/v1"\n'
        'api_key_env = "TEST_CLOUD_KEY"\n'
    )


@contextlib.contextmanager
def proxy(config: str, *args: str, env: dict[str, str] | None = None) -> Iterator[Child]:
    """`overspill serve` on a free port with `config` (TOML text) as its configuration."""
    with tempfile.TemporaryDirectory(prefix="overspill-test-") as folder:
        path = Path(folder) / "overspill.toml"
        path.write_text(config)
        command = overspill_command("serve", "--config", str(path), "--port", "0", *args)
        with running(command, env={"TEST_CLOUD_KEY": TEST_CLOUD_KEY, **(env or {})}) as p:
            # The URL is printed before start-up ends (importing litellm takes seconds when a
            # cloud is configured): a test's first request would wait it out under its own
            # timeout. /healthz answers once the proxy is up.
            httpx.get(p.url + "/healthz", timeout=120).raise_for_status()
            yield p


@contextlib.contextmanager
def demo(*args: str) -> Iterator[Child]:
    """`overspill serve --demo` on a free port, its simulators on free ports too, as a user
    starts it; `demo_config_path` finds the configuration it wrote (the simulators' URLs)."""
    command = overspill_command("serve", "--demo", "--port", "0", *args)
    with running(command, timeout=60) as p:
        httpx.get(p.url + "/healthz", timeout=120).raise_for_status()  # litellm imported
        yield p


_DEMO_CONFIG = re.compile(r"demo configuration in (\S+)")


def demo_config_path(process: Child) -> Path:
    """Where a running demo wrote its configuration: it says so before it listens."""
    found = next(m for line in list(process.output) if (m := _DEMO_CONFIG.search(line)))
    return Path(found.group(1))


def child_pids(pid: int) -> list[int]:
    """The live processes whose parent is `pid` (read from /proc: Linux only)."""
    return [child for child in _pids() if _stat(child)[1] == pid and alive(child)]


def alive(pid: int) -> bool:
    """Running: a zombie (dead, not yet reaped by whoever adopted it) does not count."""
    stat = _stat(pid)
    return stat[0] not in ("", "Z", "X")


def _pids() -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def _stat(pid: int) -> tuple[str, int]:
    """(state, parent pid) of a process; ("", 0) once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "", 0
    fields = text.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    return fields[0], int(fields[1])
