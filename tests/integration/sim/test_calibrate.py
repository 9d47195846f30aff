"""Calibration: the fitting is pure arithmetic; against a simulator of known profile, the
calibrator must recover that profile (the real-engine check is tests/e2e/test_calibration.py)."""

from __future__ import annotations

import asyncio
import re
import subprocess
from pathlib import Path

import pytest

from proxy.sim.calibrate import compare, fit_line
from tests.processes import ROOT, overspill_command, sim

KNOWN = {"decode_base_ms": 20.0, "decode_per_seq_ms": 2.0, "prefill_ms_per_token": 0.5}


def test_fit_line_recovers_a_line() -> None:
    base, slope = fit_line({1: 12.0, 2: 14.0, 4: 18.0, 8: 26.0})
    assert base == pytest.approx(10.0)
    assert slope == pytest.approx(2.0)


def test_fit_line_never_gives_a_negative_slope() -> None:
    base, slope = fit_line({1: 10.0, 2: 9.0})
    assert slope == 0.0
    assert base == pytest.approx(9.5)


def test_fit_line_with_one_point_is_flat() -> None:
    assert fit_line({4: 7.0}) == (7.0, 0.0)


def value(text: str, key: str) -> float:
    match = re.search(rf"^{key} = (\S+)$", text, re.MULTILINE)
    assert match, key
    return float(match.group(1))


def test_calibrating_a_known_simulator_recovers_its_profile(tmp_path: Path) -> None:
    args = [f"--{k.replace('_', '-')}={v}" for k, v in KNOWN.items()]
    with sim(
        "--model", "m", "--max-seqs", "6", "--block-size", "32", "--kv-tokens", "65536", *args
    ) as engine:
        out = tmp_path / "profile.toml"
        subprocess.run(
            overspill_command(
                "sim", "--calibrate", engine.url, "--calibrate-max-batch", "4", "--out", str(out)
            ),
            cwd=ROOT,
            check=True,
            timeout=120,
        )
        text = out.read_text()
        assert value(text, "max_seqs") == 6
        assert value(text, "block_size") == 32  # the simulator counts tokens as it does
        assert value(text, "kv_tokens") == 65536
        assert value(text, "decode_base_ms") == pytest.approx(20.0, rel=0.25)
        assert value(text, "decode_per_seq_ms") == pytest.approx(2.0, abs=1.0)
        assert value(text, "prefill_ms_per_token") == pytest.approx(0.5, rel=0.25)
        with sim("--model", "m", "--profile", str(out)) as twin:
            rows = asyncio.run(compare(engine.url, twin.url, "m", levels=(1, 4), max_tokens=12))
    for row in rows:
        assert abs(row.ttft_error) <= 0.25
        assert abs(row.throughput_error) <= 0.25
