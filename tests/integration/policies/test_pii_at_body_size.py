"""policies/pii.py's detectors on the slow texts of tests/pii_cases.py at 4 MB, the largest body
a request may have, past the scan limit, and through `detect` at exactly the limit (so the end
is scanned): each finishes and is right; and what a whole body costs the scan, counted.
Megabytes per case make this a few seconds of CPU, so it lives outside tests/unit. Nothing is
timed: the old lookaround patterns took 6.5 s on 60 KB of "a", so finishing at all is the point,
and the suite's timeout is the backstop."""

from __future__ import annotations

import unicodedata
from collections import Counter

import pytest

from policies.model import Privacy, PrivacyLevel
from policies.pii import DETECTORS, SCAN_LIMIT_CHARS, detect
from policies.privacy import classify
from tests.pii_cases import CASES, Case

SIZE = 4 * 1024 * 1024


@pytest.mark.parametrize("adversarial", CASES)
def test_the_detector_finishes_on_4_mb_and_is_right(adversarial: Case) -> None:
    assert DETECTORS[adversarial.detector](adversarial.text(SIZE)) is adversarial.found


@pytest.mark.parametrize("adversarial", CASES)
def test_detect_scans_up_to_the_limit_and_is_right(adversarial: Case) -> None:
    expected = [adversarial.detector] if adversarial.found else []
    assert detect([adversarial.text(SCAN_LIMIT_CHARS)], [adversarial.detector]) == expected


# --- what a whole body costs the scan, counted (issue 30) -------------------------------------

ALL = tuple(DETECTORS)
EVERY = Privacy(
    (PrivacyLevel("public"), PrivacyLevel("internal")), "public", dict.fromkeys(ALL, "internal")
)


def test_a_million_strings_cost_one_search_per_detector(monkeypatch: pytest.MonkeyPatch) -> None:
    """4 MB of one-character strings (just under the cap) with personal data in the last: each
    detector searches once, and the reason names where. Finding the place took a search per
    string before it (minutes per detector that fired)."""
    searched: Counter[str] = Counter()
    for name in ALL:
        real = DETECTORS[name]
        monkeypatch.setitem(
            DETECTORS, name, lambda text, n=name, f=real: bool(searched.update([n])) or f(text)
        )
    strings = ["1"] * 990_000 + ["mail jane.doe@exemplo.com"]
    found = classify(EVERY, header=None, body={"model": "m", "x": strings}, tenant=None)
    assert found.reasons == ("detected email in x[990000]: internal",)
    assert searched == Counter(ALL)


def test_a_4_mb_body_nfkc_expands_is_read_only_as_far_as_the_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """U+FDFA is 18 characters once normalised: 4 MB of it (1.4 million) were 25 million
    characters, built before the cap applied. Now about 1/18 of the cap is read."""
    normalised: list[int] = []
    real = unicodedata.normalize

    def counting(form: str, text: str) -> str:
        normalised.append(len(text))
        return real(form, text)

    monkeypatch.setattr(unicodedata, "normalize", counting)
    body = {"model": "m", "messages": [{"role": "user", "content": "\ufdfa" * 1_398_000}]}
    found = classify(EVERY, header=None, body=body, tenant=None)
    assert found.level == "internal"
    assert all("beyond the scan limit" in reason for reason in found.reasons)
    assert sum(length for length in normalised if length > 16) <= SCAN_LIMIT_CHARS // 18 + 512
