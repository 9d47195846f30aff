"""What each way of installing Overspill costs: set-up time and the environment's size.

For each profile, a new virtual environment in a temporary folder: `pip install .` with the
profile's extras (core, cloud, semantic), or what scripts/setup does (the hash-locked all and dev
sets, then the project itself). Times are with pip's cache and this machine's wheel folders
warm, so they measure installing, not downloading; a first download adds the network's time.
Each environment must then import the proxy, and is asked which of the heavy modules it has,
which proves the extras hold what they claim (the core has no litellm, torch, faiss or ONNX
Runtime).

    .venv/bin/python -m bench.install [--profiles core,cloud,semantic,all,dev]

Prints the table and saves bench/results/install.png. Every environment is removed at the end.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.report import plot_path, table

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("litellm", "onnxruntime", "faiss", "torch", "sentence_transformers", "pytest")
# pip install arguments after `pip install`, by profile; "lock:" profiles follow scripts/setup.
PROFILES: dict[str, tuple[str, ...]] = {
    "core": (".",),
    "cloud": (".[cloud]",),
    "semantic": (".[semantic]",),
    "all": ("lock:all",),
    "dev": ("lock:dev",),
}


@dataclass(frozen=True)
class Installed:
    profile: str
    seconds: float
    megabytes: float
    packages: int
    importable: tuple[str, ...]


def install(profile: str, venv: Path) -> Installed:
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [
        str(venv / "bin" / "python"),
        "-m",
        "pip",
        "install",
        "-q",
        "--disable-pip-version-check",
    ]
    started = time.perf_counter()
    for spec in PROFILES[profile]:
        if spec.startswith("lock:"):
            lock = ROOT / "requirements" / f"{spec.removeprefix('lock:')}.lock"
            _run([*pip, "--require-hashes", "--no-deps", "-r", str(lock)])
            _run([*pip, "--no-deps", "--no-build-isolation", "-e", str(ROOT)])
        else:
            _run([*pip, spec])
    seconds = time.perf_counter() - started
    _proxy_imports(venv)
    return Installed(profile, seconds, _megabytes(venv), _packages(venv), _importable(venv))


def _proxy_imports(venv: Path) -> None:
    """The proxy and its command line load in this environment (outside the checkout, so the
    installed package is what is imported)."""
    code = "import proxy.serve, proxy.cli, cache.store, policies.loader"
    subprocess.run([str(venv / "bin" / "python"), "-c", code], cwd="/", check=True)


def _run(command: list[str]) -> None:
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {done.stderr[-2000:]}")


def _megabytes(folder: Path) -> float:
    total = sum(path.lstat().st_size for path in folder.rglob("*") if not path.is_symlink())
    return total / 1e6


def _packages(venv: Path) -> int:
    command = [str(venv / "bin" / "python"), "-m", "pip", "list", "--format=freeze"]
    listed = subprocess.run(command, capture_output=True, text=True, check=True)
    return len(listed.stdout.split())


def _importable(venv: Path) -> tuple[str, ...]:
    """Which heavy modules the environment has (found, not imported: some take seconds)."""
    code = (
        "import importlib.util, sys; "
        "print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m)))"
    )
    found = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code, *HEAVY],
        capture_output=True,
        text=True,
        check=True,
        cwd="/",
    )
    return tuple(found.stdout.split())


def report(runs: Sequence[Installed]) -> str:
    headers = ["profile", "install s", "size MB", "packages", "has"]
    rows = [
        [
            r.profile,
            round(r.seconds, 1),
            round(r.megabytes),
            r.packages,
            ", ".join(r.importable) or "(none of them)",
        ]
        for r in runs
    ]
    return table(headers, rows)


def plot(runs: Sequence[Installed]) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r.profile for r in runs]
    figure, (size, seconds) = plt.subplots(1, 2, figsize=(10, 4))
    size.bar(names, [r.megabytes for r in runs], color="#4c72b0")
    size.set_ylabel("environment size (MB)")
    seconds.bar(names, [r.seconds for r in runs], color="#dd8452")
    seconds.set_ylabel("install time (s, pip cache warm)")
    figure.suptitle("Overspill: what each install costs")
    figure.tight_layout()
    path = plot_path("install")
    figure.savefig(path, dpi=120)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profiles", default=",".join(PROFILES))
    args = parser.parse_args(argv)
    runs = []
    for profile in args.profiles.split(","):
        with tempfile.TemporaryDirectory(prefix=f"overspill-{profile}-") as folder:
            runs.append(install(profile, Path(folder) / "venv"))
        print(f"  {profile}: {runs[-1].seconds:.1f} s", file=sys.stderr)
    print(report(runs))
    print(f"\nplot: {plot(runs)}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    sys.exit(main())
