"""Real engine versus calibrated simulator, side by side in one run.

Starts the real vLLM (CPU build, SmolLM2-135M; `overspill engine vllm`, --max-num-seqs 8),
calibrates a simulator profile from it (`overspill sim --calibrate`), starts the simulator with
that profile, and runs the same closed-loop workload on both at concurrency 1, 4 and 16: mean
time to first token and output tokens/s. Prints the table, saves the profile and a PNG.

    .venv/bin/python -m bench.calibration
"""

from __future__ import annotations

import asyncio
import subprocess
import sys

from bench.report import RESULTS, plot_path
from proxy.children import overspill_command, started
from proxy.sim.calibrate import Comparison, compare, comparison_table


def main() -> int:
    RESULTS.mkdir(parents=True, exist_ok=True)
    profile = RESULTS / "smollm2-cpu-profile.toml"
    engine_command = overspill_command("engine", "vllm", "--port", "0", "--max-num-seqs", "8")
    with started(engine_command, timeout=900) as engine:
        subprocess.run(
            overspill_command("sim", "--calibrate", engine.url, "--out", str(profile)), check=True
        )
        sim_command = overspill_command(
            "sim", "--port", "0", "--model", "smollm2", "--profile", str(profile)
        )
        with started(sim_command) as simulated:
            rows = asyncio.run(compare(engine.url, simulated.url, "smollm2"))
    print(profile.read_text())
    print(comparison_table(rows))
    plot(rows)
    return 0


def plot(rows: list[Comparison]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels = [str(r.concurrency) for r in rows]
    fig, (ttft, tput) = plt.subplots(1, 2, figsize=(9, 3.5))
    xs = range(len(rows))
    for offset, label, pick in ((-0.2, "real vLLM (CPU)", "real"), (0.2, "simulator", "simulated")):
        batches = [getattr(r, pick) for r in rows]
        ttft.bar([x + offset for x in xs], [b.ttft_mean * 1000 for b in batches], 0.4, label=label)
        tput.bar([x + offset for x in xs], [b.tokens_per_second for b in batches], 0.4, label=label)
    for ax, title in ((ttft, "mean time to first token (ms)"), (tput, "output tokens/s")):
        ax.set_xticks(list(xs), [f"c={level}" for level in levels])
        ax.set_title(title)
        ax.legend(fontsize=8)
    fig.suptitle("SmolLM2-135M on vLLM CPU (2 cores) vs the calibrated simulator")
    fig.tight_layout()
    path = plot_path("calibration")
    fig.savefig(path, dpi=120)
    print(f"plot: {path}")


if __name__ == "__main__":
    sys.exit(main())
