"""policies/budget.py's reservations: a cloud call reserves its worst case before it leaves, so
calls made at once cannot together overrun a tenant's budget by more than one call's cost."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policies.budget import Reserved, Spend, added, current, period_start, released, reserve

NOW = dt.datetime(2026, 11, 18, 13, 45, 30, tzinfo=dt.UTC).timestamp()
TODAY = period_start("day", NOW)


def reserved(spend: Spend | None, held: Reserved, worst: float, budget: float) -> Reserved | str:
    return reserve(spend, held, worst, budget, "day", "acme", NOW)


def test_a_call_that_fits_beside_the_calls_in_flight_reserves_its_worst_case() -> None:
    assert reserved(Spend(TODAY, 0.1), Reserved(0.2, 1), 0.3, 0.6) == Reserved(0.5, 2)


def test_a_call_that_does_not_fit_beside_them_is_refused_and_told_why() -> None:
    why = reserved(Spend(TODAY, 0.1), Reserved(0.4, 2), 0.3, 0.6)
    assert why == (
        "budget: tenant 'acme' spent $0.100000 and holds $0.400000 for 2 cloud calls in flight, "
        "of its $0.6 cloud budget this day; this call may cost up to $0.300000"
    )


def test_a_lone_call_may_start_while_the_budget_lasts_whatever_its_worst_case() -> None:
    """A budget smaller than one call's worst case (no max_tokens: the model's whole output)
    still serves one call at a time, as it always did: it overshoots by that call alone."""
    assert reserved(Spend(TODAY, 0.5), Reserved(), 3.0, 0.6) == Reserved(3.0, 1)
    assert isinstance(reserved(Spend(TODAY, 0.5), Reserved(3.0, 1), 0.01, 0.6), str)


def test_a_spent_budget_refuses_even_a_lone_call() -> None:
    why = reserved(Spend(TODAY, 0.6), Reserved(), 0.0, 0.6)
    assert why == "budget: tenant 'acme' spent $0.6000 of its $0.6 cloud budget this day"


def test_yesterdays_spend_does_not_count_today() -> None:
    yesterday = Spend(TODAY - 86_400, 5.0)
    assert reserved(yesterday, Reserved(), 0.3, 0.6) == Reserved(0.3, 1)


def test_a_reservation_given_back_leaves_exactly_nothing_once_no_call_is_left() -> None:
    held = Reserved(0.1 + 0.2, 2)
    once = released(held, 0.1)
    assert once.calls == 1
    assert once.usd == pytest.approx(0.2)
    assert released(once, 0.2) == Reserved()
    assert released(Reserved(), 0.2) == Reserved()  # never below nothing


# A call: its worst case, what it turns out to cost (at most that), and whether it ends before
# the next call asks (else it stays in flight to the end).
calls = st.lists(
    st.tuples(st.floats(0.0, 2.0), st.floats(0.0, 1.0), st.booleans()),
    max_size=40,
)


@given(calls, st.floats(0.01, 5.0))
def test_calls_at_once_never_commit_more_than_the_budget_and_one_calls_worst_case(
    script: list[tuple[float, float, bool]], budget: float
) -> None:
    spend: Spend | None = None
    held, in_flight, largest = Reserved(), [], 0.0
    for worst, share, ends_at_once in script:
        verdict = reserve(spend, held, worst, budget, "day", "acme", NOW)
        if isinstance(verdict, str):
            continue
        held, largest = verdict, max(largest, worst)
        committed = current(spend, "day", NOW).usd + held.usd
        assert committed <= budget + largest + 1e-9
        if ends_at_once:  # settled: its true cost replaces its worst case
            spend, held = added(spend, worst * share, "day", NOW), released(held, worst)
        else:
            in_flight.append((worst, share))
    for worst, share in in_flight:  # they end: spent at most their worst cases
        spend, held = added(spend, worst * share, "day", NOW), released(held, worst)
    assert held == Reserved()
    assert current(spend, "day", NOW).usd <= budget + largest + 1e-9
