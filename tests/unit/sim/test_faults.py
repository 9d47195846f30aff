from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from proxy.errors import BadRequest
from proxy.sim.faults import Faults, merge_faults, parse_fault_flag


def draws(faults: Faults, count: int = 1000, seed: int = 1) -> Counter[str]:
    rng = random.Random(seed)
    return Counter(faults.draw(rng) for _ in range(count))


# -- merge_faults -----------------------------------------------------------------------------


def test_merge_applies_the_fields_sent() -> None:
    merged = merge_faults(Faults(), {"error_rate": 0.25, "error_status": 503})
    assert (merged.error_rate, merged.error_status) == (0.25, 503)


def test_merge_keeps_the_fields_not_sent() -> None:
    current = Faults(hang_s=2.0, drop_after_chunks=3, rate_limit_rate=0.5)
    merged = merge_faults(current, {"error_rate": 0.1})
    assert merged == Faults(hang_s=2.0, drop_after_chunks=3, rate_limit_rate=0.5, error_rate=0.1)


def test_merge_leaves_the_current_faults_unchanged() -> None:
    current = Faults()
    merge_faults(current, {"hang_s": 5})
    assert current == Faults()


def test_merge_can_switch_drop_after_chunks_off_again() -> None:
    merged = merge_faults(Faults(drop_after_chunks=4), {"drop_after_chunks": None})
    assert merged.drop_after_chunks is None


def test_an_unknown_fault_is_rejected_naming_it() -> None:
    with pytest.raises(BadRequest) as caught:
        merge_faults(Faults(), {"error_rate": 0.1, "explode": True})
    assert caught.value.param == "explode"
    assert "error_rate" in caught.value.message  # the known fields are listed


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("error_rate", 1.5),
        ("error_rate", -0.1),
        ("error_rate", "0.5"),
        ("error_rate", True),
        ("rate_limit_rate", 2),
        ("rate_limit_rate", float("nan")),
        ("error_status", 418),
        ("error_status", "500"),
        ("retry_after_s", -1),
        ("extra_latency_ms", "slow"),
        ("hang_s", -0.5),
        ("listener_down_s", None),
        ("drop_after_chunks", -1),
        ("drop_after_chunks", 1.5),
        ("drop_after_chunks", True),
    ],
)
def test_an_invalid_value_is_rejected_naming_the_field(name: str, value: Any) -> None:
    with pytest.raises(BadRequest) as caught:
        merge_faults(Faults(), {name: value})
    assert caught.value.param == name
    assert caught.value.status == 400


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_server_error_statuses_are_accepted(status: int) -> None:
    assert merge_faults(Faults(), {"error_status": status}).error_status == status


def test_boundary_rates_are_accepted() -> None:
    merged = merge_faults(Faults(), {"error_rate": 0, "rate_limit_rate": 1})
    assert (merged.error_rate, merged.rate_limit_rate) == (0, 1)


# -- draw -------------------------------------------------------------------------------------


def test_no_faults_draws_ok_every_time() -> None:
    assert draws(Faults()) == {"ok": 1000}


def test_error_rate_gives_about_that_share_of_errors() -> None:
    counts = draws(Faults(error_rate=0.2))
    assert 160 <= counts["error"] <= 240
    assert counts["rate_limit"] == 0


def test_rate_limit_rate_gives_about_that_share_of_rate_limits() -> None:
    counts = draws(Faults(rate_limit_rate=0.3))
    assert 255 <= counts["rate_limit"] <= 345
    assert counts["error"] == 0


def test_a_rate_of_one_always_fires() -> None:
    assert draws(Faults(rate_limit_rate=1.0), count=200) == {"rate_limit": 200}
    assert draws(Faults(error_rate=1.0), count=200) == {"error": 200}


def test_draws_from_the_same_seed_repeat() -> None:
    faults = Faults(error_rate=0.4, rate_limit_rate=0.2)
    assert draws(faults, seed=9) == draws(faults, seed=9)


def test_delay_adds_extra_latency_and_hang() -> None:
    assert Faults(extra_latency_ms=250, hang_s=2).delay_s == pytest.approx(2.25)


# -- parse_fault_flag -------------------------------------------------------------------------


def test_a_fault_flag_with_a_float_value() -> None:
    assert parse_fault_flag("error_rate=0.2") == {"error_rate": 0.2}


def test_a_fault_flag_with_an_integer_value_stays_an_integer() -> None:
    parsed = parse_fault_flag("drop_after_chunks=3")
    assert parsed == {"drop_after_chunks": 3}
    assert isinstance(parsed["drop_after_chunks"], int)


@pytest.mark.parametrize("raw", ["null", "none", ""])
def test_a_fault_flag_can_clear_a_value(raw: str) -> None:
    assert parse_fault_flag(f"drop_after_chunks={raw}") == {"drop_after_chunks": None}


def test_a_fault_flag_name_is_stripped() -> None:
    assert parse_fault_flag(" hang_s =5") == {"hang_s": 5}


def test_a_fault_flag_without_equals_is_rejected() -> None:
    with pytest.raises(BadRequest, match="NAME=VALUE"):
        parse_fault_flag("error_rate")


def test_a_fault_flag_with_a_non_number_is_rejected() -> None:
    with pytest.raises(BadRequest, match="not a number"):
        parse_fault_flag("error_rate=lots")


def test_a_parsed_fault_flag_feeds_merge_faults() -> None:
    merged = merge_faults(Faults(), parse_fault_flag("error_status=503"))
    assert merged.error_status == 503
