"""bench/instructions.py reads the event total callgrind writes at a profile's end."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.instructions import _total


def test_the_total_is_read_from_either_line_callgrind_writes(tmp_path: Path) -> None:
    profile = tmp_path / "callgrind.out"
    profile.write_text("events: Ir\nfn=main\n16 5\nsummary: 4851524027\ntotals: 4851524027\n")
    assert _total(profile) == 4_851_524_027
    profile.write_text("events: Ir\ntotals: 12\n")
    assert _total(profile) == 12


def test_a_profile_without_a_total_is_an_error_not_zero(tmp_path: Path) -> None:
    profile = tmp_path / "callgrind.out"
    profile.write_text("events: Ir\nfn=main\n16 5\n")
    with pytest.raises(RuntimeError, match="no totals"):
        _total(profile)
