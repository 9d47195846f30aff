"""proxy/flow/ledger.py: the cloud spend saved and read back; a damaged file is moved aside."""

from __future__ import annotations

from pathlib import Path

from policies.budget import Spend
from proxy.flow.ledger import load, save


def test_spend_survives_a_save_and_a_load(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "spend.json"
    spend = {"acme": Spend(1_700_000_000.0, 4.25), "globex": Spend(1_700_003_600.0, 0.5)}
    save(spend, path)
    assert load(path) == spend
    assert [p.name for p in path.parent.iterdir()] == ["spend.json"]  # no temporary left


def test_a_missing_ledger_is_no_spend(tmp_path: Path) -> None:
    assert load(tmp_path / "nothing.json") == {}


def test_a_damaged_ledger_is_moved_aside_and_empty(tmp_path: Path) -> None:
    path = tmp_path / "spend.json"
    path.write_text('{"acme": {"start": 1, "usd": ')
    assert load(path) == {}
    assert not path.exists()
    assert (tmp_path / "spend.json.corrupt").exists()
    path.write_text('{"acme": 3}')
    assert load(path) == {}
