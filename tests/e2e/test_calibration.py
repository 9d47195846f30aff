"""`overspill sim --calibrate` against the real vLLM here, then the calibrated simulator must
reproduce the engine's mean time to first token and tokens/s at concurrency 1 and 8 (the
engine's full batch) within 25% (a closed loop of 2 x concurrency requests of 150 words and 16
output tokens). The suite calibrates up to the engine's batch and compares at two levels;
bench/calibration.py runs the full calibration and adds concurrency 4 and 16 (queueing).

The real engine shares a 2-core machine with whatever else runs on the host: a level that is off
is calibrated and measured again, up to three times in all, and must agree once. A simulator
that is wrong stays wrong on every try; a neighbour's burst, or a drift of the machine's speed
between calibrating and comparing, does not last three."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from proxy.sim.calibrate import Comparison, compare, comparison_table
from tests.e2e.conftest import MAX_NUM_SEQS
from tests.processes import ROOT, Process, overspill_command, sim

pytestmark = [pytest.mark.real_engine, pytest.mark.timeout(900)]
TOLERANCE = 0.25
TRIES = 3
LEVELS = (1, MAX_NUM_SEQS)


def agrees(row: Comparison) -> bool:
    return abs(row.ttft_error) <= TOLERANCE and abs(row.throughput_error) <= TOLERANCE


def calibrate(engine: Process, profile: Path) -> None:
    command = overspill_command(
        "sim", "--calibrate", engine.url, "--out", str(profile),
        "--calibrate-max-batch", str(MAX_NUM_SEQS),
    )  # fmt: skip
    subprocess.run(command, cwd=ROOT, check=True, timeout=300)


def test_calibrated_simulator_reproduces_the_real_engine(engine: Process, tmp_path: Path) -> None:
    """A level that is off is calibrated again before it is compared again: this machine's
    speed drifts within minutes (seen in CI: the engine 27-32% slower at concurrency 8 than
    when it was calibrated, on all three tries), and a profile measured then and compared now
    would be judged on the drift, not on the simulator."""
    profile = tmp_path / "smollm2-cpu.toml"
    calibrate(engine, profile)
    text = profile.read_text()
    assert f"max_seqs = {MAX_NUM_SEQS}\n" in text  # measured, not guessed
    assert "block_size = " in text
    tries: dict[int, list[Comparison]] = {level: [] for level in LEVELS}
    for level in LEVELS:
        while len(tries[level]) < TRIES and not any(agrees(r) for r in tries[level]):
            if tries[level]:
                calibrate(engine, profile)
            with sim("--model", "smollm2", "--profile", str(profile)) as simulated:
                tries[level] += asyncio.run(compare(engine.url, simulated.url, "smollm2", (level,)))
    every = [row for rows in tries.values() for row in rows]
    print("\n" + comparison_table(every))
    for level, rows in tries.items():
        assert any(agrees(row) for row in rows), f"concurrency {level}:\n{comparison_table(rows)}"
