"""policies/pii.py's detectors on the slow texts of tests/pii_cases.py at 4 MB, the largest body
a request may have, past the scan limit: each finishes and is right. Megabytes per case make
this a few seconds of CPU, so it lives outside tests/unit. Nothing is timed: the old lookaround
patterns took 6.5 s on 60 KB of "a", so finishing at all is the point, and the suite's timeout is
the backstop."""

from __future__ import annotations

import pytest

from policies.pii import DETECTORS
from tests.pii_cases import CASES, Case

SIZE = 4 * 1024 * 1024


@pytest.mark.parametrize("adversarial", CASES)
def test_the_detector_finishes_on_4_mb_and_is_right(adversarial: Case) -> None:
    assert DETECTORS[adversarial.detector](adversarial.text(SIZE)) is adversarial.found
