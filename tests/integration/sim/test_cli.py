"""`overspill sim` flags and profile files, as a user runs them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx

from tests.processes import ROOT, overspill_command, sim


def test_profile_file_sets_the_engine_and_flags_override_it(tmp_path: Path) -> None:
    profile = tmp_path / "engine.toml"
    profile.write_text("[engine]\nmax_seqs = 3\nmax_model_len = 512\nblock_size = 128\n")
    with sim("--model", "m", "--profile", str(profile), "--max-model-len", "600") as engine:
        models = httpx.get(engine.url + "/v1/models").json()
        assert models["data"][0]["max_model_len"] == 600
        too_long = {"model": "m", "prompt": "x", "max_tokens": 700}
        assert httpx.post(engine.url + "/v1/completions", json=too_long).status_code == 400


def test_bad_profile_exits_2_naming_the_key(tmp_path: Path) -> None:
    profile = tmp_path / "engine.toml"
    profile.write_text("[engine]\nmax_seqs = 'many'\n")
    result = subprocess.run(
        overspill_command("sim", "--profile", str(profile)),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=30,
    )
    assert result.returncode == 2
    assert "engine.max_seqs" in result.stderr
    assert "expected int" in result.stderr


def test_invalid_flag_value_exits_2() -> None:
    result = subprocess.run(
        overspill_command("sim", "--max-seqs", "0"),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=30,
    )
    assert result.returncode == 2
    assert "max_seqs must be at least 1" in result.stderr
