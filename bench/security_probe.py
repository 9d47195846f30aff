"""Issue 30's attacks on the real proxy: what each costs the event loop and the memory, and what
the attacker or its victim got; after a fix, and on an older checkout (--tree) for "before".

Real processes on 127.0.0.1: a vLLM-personality simulator (model "sim-model", prompts of up to
4 M tokens), a cloud-personality one (gpt-4o-mini), and per attack (bench/security_attacks.py) a
fresh `overspill serve` with a policy written here (speculation off: the cache decides alone).
Around each attack, once the semantic layer is loaded: a second client polls GET /healthz every
~10 ms on its own connection (the max and p99 of its waits are the loop's stall; a poll still
held at the end counts its wait so far), through the attack and 0.5 s after; the proxy's peak
RSS is reset (/proc/PID/clear_refs) before and read (VmHWM) after. Each attack gives up after
60 s, the run after 10 minutes. A Markdown table on stdout; JSON and a PNG of the stalls in
bench/results/security_probe-LABEL.*.

    .venv/bin/python -m bench.security_probe [--tree PATH] [--label L] [--header-mb 64] [--only 1,4]

--tree PATH runs every process from that checkout (`python -m proxy.cli` imports from the
working directory first), e.g. a worktree of an old commit. `[cache] semantic_unkeyed` (which a
newer tree needs to give anonymous callers the semantic layer) is set where its loader takes it.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from bench.report import RESULTS, plot_path, table
from bench.security_attacks import ATTACKS, CLOUD_KEY_ENV, Attack, Target, ask, plant, status
from proxy.children import Child, overspill_command, started, started_all

ATTACK_S, RUN_S = 60.0, 600.0
POLL_S, TAIL_S = 0.01, 0.5
BIG = ("--max-model-len", "4000000", "--kv-tokens", "40000000", "--max-batched-tokens", "4000000")
ENGINE = (
    *("--model", "sim-model", "--decode-base-ms", "1", "--decode-per-seq-ms", "0"),
    *("--prefill-ms-per-token", "0.00001", "--block-size", "1024", "--max-body-bytes", "33554432"),
    *BIG,
)
# every answer 400 tokens, ~2 s: eight calls at once overlap
CLOUD = (
    *("--personality", "cloud", "--model", "gpt-4o-mini", "--decode-base-ms", "5"),
    *("--output-tokens", "400", "--output-distribution", "fixed"),
)


@dataclass(frozen=True)
class Tree:
    path: Path
    label: str
    unkeyed: bool  # its loader accepts [cache] semantic_unkeyed


@dataclass
class Row:
    attack: str
    stall_max_ms: float = 0.0
    stall_p99_ms: float = 0.0
    polls: int = 0
    failed_polls: int = 0
    status: str = "-"
    seconds: float = 0.0
    rss_before_mb: float = 0.0
    peak_growth_mb: float = 0.0
    rss_after_mb: float = 0.0
    got: str = ""
    facts: dict[str, object] = field(default_factory=dict)


# --- the tree ----------------------------------------------------------------------------------
def tree_of(path: Path, label: str) -> Tree:
    return Tree(path, label or _commit(path), _accepts_unkeyed(path))


def _commit(path: Path) -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=path, capture_output=True, text=True).stdout

    changed = git("status", "--porcelain", "--untracked-files=no").strip()
    return git("rev-parse", "--short", "HEAD").strip() + ("-changed" if changed else "")


def _accepts_unkeyed(path: Path) -> bool:
    """Tried: an older loader refuses a key it does not know."""
    with tempfile.TemporaryDirectory() as folder:
        policy = Path(folder) / "p.toml"
        policy.write_text(f"[cache]\nsemantic_unkeyed = true\n{_backend('http://127.0.0.1:9')}")
        check = overspill_command("check", str(policy))
        return subprocess.run(check, cwd=path, capture_output=True, timeout=120).returncode == 0


def _backend(url: str) -> str:
    return f'[[backends]]\nname = "local"\nkind = "vllm"\nurl = "{url}"\nmodels = ["sim-model"]\n'


def policy(tree: Tree, attack: Attack, engine: str, cloud: str) -> str:
    unkeyed = "semantic_unkeyed = true\n" if tree.unkeyed else ""
    return (
        '[server]\nlog_level = "warning"\nprobe_interval_s = 0.5\nmax_body_bytes = 8_388_608\n'
        "[retry]\nattempts = 1\n"
        f"[cache]\nspeculate = false\n{unkeyed}{attack.cache}"
        + _backend(engine)
        + attack.policy.replace("CLOUD_URL", cloud)
    )


@contextlib.contextmanager
def serving(tree: Tree, text: str) -> Iterator[Child]:
    with tempfile.TemporaryDirectory(prefix="security-probe-") as folder:
        path = Path(folder) / "overspill.toml"
        path.write_text(text)
        command = overspill_command("serve", "--config", str(path), "--port", "0")
        env = {CLOUD_KEY_ENV: "sk-security-probe-cloud"}
        with started(command, 60, env, cwd=str(tree.path)) as child:
            httpx.get(child.url + "/healthz", timeout=120).raise_for_status()  # litellm loaded
            yield child


# --- measuring ---------------------------------------------------------------------------------
class Poller(threading.Thread):
    """GET /healthz every ~10 ms on one kept-alive connection: each answer's wait is how long
    the proxy's event loop held it."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        parts = urlsplit(url)
        self.address = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.waits: list[float] = []
        self.failures = 0
        self.began: float | None = None  # the poll in flight
        self.halt = threading.Event()

    def run(self) -> None:
        connection: http.client.HTTPConnection | None = None
        while not self.halt.is_set():
            self.began = began = time.perf_counter()
            try:
                connection = connection or http.client.HTTPConnection(*self.address, timeout=120)
                connection.request("GET", "/healthz")
                connection.getresponse().read()
            except (OSError, http.client.HTTPException):
                self.failures += 1
                connection = None
            self.waits.append(time.perf_counter() - began)
            self.began = None
            self.halt.wait(POLL_S)

    def stop(self) -> None:
        self.halt.set()
        self.join(5)
        began = self.began
        if self.is_alive() and began is not None:  # still held: its wait so far, at least
            self.waits.append(time.perf_counter() - began)


def _kib(pid: int, key: str) -> int:
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:  # the proxy died (out of memory?)
        return 0
    return next((int(line.split()[1]) for line in lines if line.startswith(key + ":")), 0)


def measured(child: Child, attack: Attack, target: Target) -> Row:
    pid = child.popen.pid
    with contextlib.suppress(OSError):  # not allowed: VmHWM is then the process's whole peak
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM := VmRSS: the attack's own
    before = _kib(pid, "VmRSS")
    poller = Poller(child.url)
    poller.start()
    try:
        outcome = attack.run(target)
        time.sleep(TAIL_S)  # what the proxy does after its answer (storing, embedding) counts
    finally:
        poller.stop()
    peak, after = _kib(pid, "VmHWM"), _kib(pid, "VmRSS")
    waits = sorted(poller.waits) or [0.0]
    stall = (waits[-1] * 1000, waits[int(0.99 * (len(waits) - 1))] * 1000, len(poller.waits))
    memory = (before / 1024, max(0, peak - before) / 1024, after / 1024)
    values = (*stall, poller.failures, outcome.status, outcome.seconds, *memory)
    return Row(attack.name, *values, outcome.got, outcome.facts | {"exit": child.popen.poll()})


def warm(t: Target) -> str:
    """Load the semantic layer and take one candidate through the guard and the verifier (in a
    context of its own: max_tokens 5), so that no row counts their start; "" once ready."""
    plant(t, "How do I reset my password?", max_tokens=5)
    while time.monotonic() < t.deadline:
        cache_status = status(t.url)["cache"]
        if cache_status["embedder_ready"] and cache_status.get("verifier_ready") is not False:
            ask(t, "How can I reset my password?", max_tokens=5)
            return ""
        time.sleep(0.2)
    return "semantic layer not ready in time (the verifier being made?): no semantic hit"


def one(tree: Tree, attack: Attack, sims: dict[str, Child], header_mb: int, ends: float) -> Row:
    engine, cloud, ready_by = sims["engine"].url, sims["cloud"].url, ends - ATTACK_S
    try:
        with serving(tree, policy(tree, attack, engine, cloud)) as child:
            at = partial(Target, child.url, engine, cloud, header_mb)
            note = (attack.prepare or warm)(at(min(time.monotonic() + 30, ready_by)))
            row = measured(child, attack, at(time.monotonic() + ATTACK_S))
    except Exception as error:  # one attack this tree cannot take must not lose the others
        return Row(attack.name, got=f"not run: {type(error).__name__}: {_first_line(error)}")
    row.got += f" [{note}]" if note else ""
    return row


def _first_line(error: Exception) -> str:
    lines = [line for line in str(error).splitlines() if line.strip()] or [""]
    return next((line for line in lines if "error" in line.lower()), lines[0])


def probe(tree: Tree, attacks: Sequence[Attack], header_mb: int) -> list[Row]:
    commands = {"engine": overspill_command("sim", "--port", "0", *ENGINE)}
    commands["cloud"] = overspill_command("sim", "--port", "0", *CLOUD)
    rows, ends = [], time.monotonic() + RUN_S
    with started_all(commands, 60, cwd=str(tree.path)) as sims:
        for attack in attacks:
            if time.monotonic() + ATTACK_S > ends:
                rows.append(Row(attack.name, got="skipped: the run's 10 minutes are spent"))
                continue
            print(f"{attack.name}...", file=sys.stderr, flush=True)
            rows.append(one(tree, attack, sims, header_mb, ends))
    return rows


# --- the report --------------------------------------------------------------------------------

FIELDS = "attack stall_max_ms stall_p99_ms polls status seconds rss_before_mb peak_growth_mb got"
HEADERS = "attack|stall max ms|p99 ms|polls|status|s|RSS MB|peak +MB|got".split("|")


def report(tree: Tree, rows: list[Row], header_mb: int) -> None:
    cells = [[getattr(row, name) for name in FIELDS.split()] for row in rows]
    print(f"tree {tree.path} ({tree.label}); semantic_unkeyed set: {tree.unkeyed}")
    print(table(HEADERS, cells))
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"security_probe-{tree.label}.json"
    meta = {"tree": str(tree.path), "label": tree.label, "semantic_unkeyed": tree.unkeyed}
    meta |= {"header_mb": header_mb, "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    path.write_text(json.dumps({**meta, "rows": [asdict(r) for r in rows]}, indent=2))
    print(f"\njson: {path}")
    print(plot(tree, rows))


def plot(tree: Tree, rows: list[Row]) -> str:
    try:
        import matplotlib
    except ImportError:
        return "plot: skipped (matplotlib is not installed)"
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(9, 4))
    bars = axis.bar([r.attack for r in rows], [max(r.stall_max_ms, 1.0) for r in rows])
    axis.bar_label(bars, fmt="%.0f")
    axis.set_yscale("log")
    axis.set_ylim(1, 3 * max(r.stall_max_ms for r in rows) + 10)  # room for the labels
    axis.set_ylabel("longest /healthz wait (ms, log)")
    axis.set_title(f"Event-loop stall per attack ({tree.label})")
    plt.setp(axis.get_xticklabels(), rotation=30, ha="right", rotation_mode="anchor")
    figure.tight_layout()
    path = plot_path(f"security_probe-{tree.label}")
    figure.savefig(path, dpi=120)
    return f"plot: {path}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.security_probe", description=__doc__)
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--tree", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--label", default="", help="names the outputs (default: its commit)")
    parser.add_argument("--header-mb", type=int, default=64, help="attack 3b's head, MiB")
    parser.add_argument("--only", default="", help="attacks whose names start so, by commas")
    args = parser.parse_args(argv)
    wanted = [w.strip() for w in args.only.split(",") if w.strip()]
    attacks = [a for a in ATTACKS if not wanted or any(a.name.startswith(w) for w in wanted)]
    tree = tree_of(args.tree.resolve(), args.label)
    report(tree, probe(tree, attacks, args.header_mb), args.header_mb)
    return 0


if __name__ == "__main__":
    sys.exit(main())
