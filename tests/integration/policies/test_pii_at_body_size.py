"""policies/pii.py's detectors on the slow texts of tests/pii_cases.py at 4 MB, the largest body
a request may have, past the scan limit, and through `detect` at exactly the limit (so the end
is scanned): each finishes and is right. Megabytes per case make
this a few seconds of CPU, so it lives outside tests/unit. Nothing is timed: the old lookaround
patterns took 6.5 s on 60 KB of "a", so finishing at all is the point, and the suite's timeout is
the backstop."""

from __future__ import annotations

import pytest

from policies.pii import DETECTORS, SCAN_LIMIT_CHARS, detect
from tests.pii_cases import CASES, Case

SIZE = 4 * 1024 * 1024


@pytest.mark.parametrize("adversarial", CASES)
def test_the_detector_finishes_on_4_mb_and_is_right(adversarial: Case) -> None:
    assert DETECTORS[adversarial.detector](adversarial.text(SIZE)) is adversarial.found


@pytest.mark.parametrize("adversarial", CASES)
def test_detect_scans_up_to_the_limit_and_is_right(adversarial: Case) -> None:
    expected = [adversarial.detector] if adversarial.found else []
    assert detect([adversarial.text(SCAN_LIMIT_CHARS)], [adversarial.detector]) == expected
