"""Shared pytest configuration; process helpers live in tests/processes.py.

Tests that leave something to look at (the dashboard's screenshot) write it under
test-artifacts/ through the `artifact` fixture; the run's summary lists them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
_written: list[Path] = []


@pytest.fixture
def artifact() -> Callable[[str], Path]:
    """A path under test-artifacts/ to write a file to; listed at the end of the run."""

    def path(name: str) -> Path:
        ARTIFACTS.mkdir(exist_ok=True)
        target = ARTIFACTS / name
        _written.append(target)
        return target

    return path


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    written = [path for path in _written if path.exists()]
    if written:
        terminalreporter.section("artifacts")
        for path in written:
            terminalreporter.write_line(f"{path} ({path.stat().st_size:,} bytes)")
