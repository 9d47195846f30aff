"""A reason's kind for the metrics' `reason` label: from a fixed set, whatever the text."""

from __future__ import annotations

import pytest

from proxy.ops.observe import reason_kind


@pytest.mark.parametrize(
    ("reason", "kind"),
    [
        ("least outstanding: sim (0 outstanding)", "least outstanding"),
        ("saturated: queue 9 >= 8", "saturated"),
        ("saturated, no cloud allowed: queued locally", "saturated, no cloud allowed"),
        ("privacy=restricted: cloud openai not allowed", "privacy"),
        ("breaker open: sim (3 failures)", "breaker open"),
        ("unhealthy: sim (not answering)", "unhealthy"),
        ("overflow on queue depth", "overflow"),
        ("prefix (12 blocks held)", "prefix"),
        ("  round robin  ", "round robin"),
        ("priority: batch never overflows to the cloud", "priority"),
        ("saturatedly: x", "other"),  # a kind's prefix is not the kind
        ("a client's text: least outstanding", "other"),
        ("", "other"),
    ],
)
def test_the_head_of_the_first_reason_names_its_kind(reason: str, kind: str) -> None:
    assert reason_kind([reason, "least outstanding: ignored"]) == kind


def test_no_reason_is_none() -> None:
    assert reason_kind([]) == "none"
    assert reason_kind(()) == "none"
