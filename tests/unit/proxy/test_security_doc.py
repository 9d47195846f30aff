"""docs/security.md backs every line with a test: each test it names must exist."""

from __future__ import annotations

import re

from tests.processes import ROOT

REFERENCE = re.compile(r"`(tests/[\w/]+\.py)(?:::(\w+))?`|`::(\w+)`")


def named_tests() -> list[tuple[str, str | None]]:
    """(file, test or None) for every reference; `::name` belongs to the file named before it."""
    text = (ROOT / "docs" / "security.md").read_text()
    found, current = [], ""
    for match in REFERENCE.finditer(text):
        path, test, continued = match.groups()
        current = path or current
        found.append((current, test or continued))
    return found


def test_every_test_the_security_page_names_exists() -> None:
    references = named_tests()
    assert len(references) >= 30
    missing = []
    for path, test in references:
        source = ROOT / path
        if not source.exists() or (test and f"def {test}(" not in source.read_text()):
            missing.append(f"{path}::{test}" if test else path)
    assert missing == []
