"""`overspill sim --calibrate` against the real vLLM here, then the calibrated simulator must
reproduce the engine's mean time to first token and tokens/s at concurrency 1, 4 and 16 within
25% (a closed loop of 2 x concurrency requests of 150 words and 16 output tokens)."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from proxy.sim.calibrate import compare, comparison_table
from tests.e2e.conftest import MAX_NUM_SEQS
from tests.processes import ROOT, Process, overspill_command, sim

pytestmark = [pytest.mark.real_engine, pytest.mark.timeout(900)]


def test_calibrated_simulator_reproduces_the_real_engine(engine: Process, tmp_path: Path) -> None:
    profile = tmp_path / "smollm2-cpu.toml"
    subprocess.run(
        overspill_command("sim", "--calibrate", engine.url, "--out", str(profile)),
        cwd=ROOT, check=True, timeout=300,
    )  # fmt: skip
    text = profile.read_text()
    assert f"max_seqs = {MAX_NUM_SEQS}\n" in text  # measured, not guessed
    assert "block_size = " in text
    with sim("--model", "smollm2", "--profile", str(profile)) as simulated:
        rows = asyncio.run(compare(engine.url, simulated.url, "smollm2"))
    print("\n" + comparison_table(rows))
    for row in rows:
        assert abs(row.ttft_error) <= 0.25, comparison_table(rows)
        assert abs(row.throughput_error) <= 0.25, comparison_table(rows)
