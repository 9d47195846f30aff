"""policies/budget.py: calendar periods in UTC, spend per period, when the cloud closes."""

from __future__ import annotations

import datetime as dt

import pytest

from policies.budget import Spend, added, current, exhausted, period_start

# Wednesday 2026-11-18 13:45:30 UTC
NOW = dt.datetime(2026, 11, 18, 13, 45, 30, tzinfo=dt.UTC).timestamp()


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> float:
    return dt.datetime(year, month, day, hour, minute, second, tzinfo=dt.UTC).timestamp()


@pytest.mark.parametrize(
    ("period", "start"),
    [
        ("hour", utc(2026, 11, 18, 13)),
        ("day", utc(2026, 11, 18)),
        ("week", utc(2026, 11, 16)),  # the Monday
        ("month", utc(2026, 11, 1)),
    ],
)
def test_periods_are_calendar_ones_in_utc(period: str, start: float) -> None:
    assert period_start(period, NOW) == start  # type: ignore[arg-type]


def test_spend_adds_up_within_a_period_and_restarts_in_the_next() -> None:
    spend = added(None, 1.5, "day", NOW)
    spend = added(spend, 2.0, "day", NOW + 3600)
    assert spend == Spend(utc(2026, 11, 18), 3.5)
    tomorrow = utc(2026, 11, 19, 0, 0, 1)
    assert current(spend, "day", tomorrow) == Spend(utc(2026, 11, 19), 0.0)
    assert added(spend, 0.25, "day", tomorrow).usd == 0.25


def test_the_cloud_closes_once_the_budget_is_spent_and_reopens_next_period() -> None:
    spend = added(None, 4.99, "day", NOW)
    assert exhausted(spend, 5.0, "day", "acme", NOW) == ""
    spend = added(spend, 0.02, "day", NOW)
    reason = exhausted(spend, 5.0, "day", "acme", NOW)
    assert reason == "budget: tenant 'acme' spent $5.0100 of its $5 cloud budget this day"
    assert exhausted(spend, 5.0, "day", "acme", utc(2026, 11, 19)) == ""


def test_no_budget_never_closes_the_cloud() -> None:
    assert exhausted(added(None, 1e9, "month", NOW), None, "month", "acme", NOW) == ""


def test_a_zero_budget_closes_the_cloud_from_the_start() -> None:
    assert exhausted(None, 0.0, "hour", "acme", NOW).startswith("budget: tenant 'acme'")
