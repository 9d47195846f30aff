"""Has a tenant spent its cloud budget for this period, and may one more cloud call start (pure)?
Periods are calendar ones in UTC (the hour, the day, the week from Monday, the month), so "5 USD
a day" resets at midnight UTC, as providers' own budgets do. Spend past the budget closes the
cloud to the tenant until the next period.

A call's cost is known only once it has ended, so a call about to be made reserves the most it
could cost (its worst case), and its true cost replaces the reservation when it is charged: calls
made at once see each other's worst cases, not a spend that has not come yet. A call starts when
the spend, the reservations and its own worst case fit the budget, or when it would be the
tenant's only call in flight (as one call at a time always did), so a small budget still serves
one call at a time and concurrency overshoots the budget by at most one call's cost.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Literal

Period = Literal["hour", "day", "week", "month"]
PERIODS: tuple[Period, ...] = ("hour", "day", "week", "month")
# Prices summed in floats miss by a few ulps: a call that fits exactly must not be refused.
_ROUNDING = 1e-9


def period_start(period: Period, now: float) -> float:
    """Epoch seconds at which the period holding `now` (epoch seconds) began."""
    moment = dt.datetime.fromtimestamp(now, dt.UTC)
    hour = moment.replace(minute=0, second=0, microsecond=0)
    day = hour.replace(hour=0)
    starts = {
        "hour": hour,
        "day": day,
        "week": day - dt.timedelta(days=day.weekday()),
        "month": day.replace(day=1),
    }
    return starts[period].timestamp()


@dataclass(frozen=True)
class Spend:
    start: float  # the period this spend belongs to
    usd: float = 0.0


def current(spend: Spend | None, period: Period, now: float) -> Spend:
    """The spend of the period holding `now` (a new period starts at zero)."""
    start = period_start(period, now)
    return spend if spend is not None and spend.start == start else Spend(start)


def added(spend: Spend | None, usd: float, period: Period, now: float) -> Spend:
    now_spend = current(spend, period, now)
    return Spend(now_spend.start, now_spend.usd + usd)


def exhausted(
    spend: Spend | None, budget: float | None, period: Period, tenant: str, now: float
) -> str:
    """Why the cloud is closed to the tenant ("" when it is not)."""
    if budget is None:
        return ""
    usd = current(spend, period, now).usd
    if usd < budget:
        return ""
    return (
        f"budget: tenant {tenant!r} spent ${usd:.4f} of its ${budget:g} cloud budget this {period}"
    )


@dataclass(frozen=True)
class Reserved:
    """What a tenant's cloud calls in flight may still cost: the sum of their worst cases."""

    usd: float = 0.0
    calls: int = 0


def reserve(
    spend: Spend | None,
    reserved: Reserved,
    worst: float,
    budget: float,
    period: Period,
    tenant: str,
    now: float,
) -> Reserved | str:
    """The tenant's reservations with a call of this worst case added, or why it may not start."""
    closed = exhausted(spend, budget, period, tenant, now)
    if closed:
        return closed
    usd = current(spend, period, now).usd
    if usd + reserved.usd + worst <= budget * (1 + _ROUNDING) or reserved.calls == 0:
        return Reserved(reserved.usd + worst, reserved.calls + 1)
    return (
        f"budget: tenant {tenant!r} spent ${usd:.6f} and holds ${reserved.usd:.6f} for "
        f"{reserved.calls} cloud calls in flight, of its ${budget:g} cloud budget this {period}; "
        f"this call may cost up to ${worst:.6f}"
    )


def released(reserved: Reserved, worst: float) -> Reserved:
    """A call's reservation given back (its true cost charged, or none due)."""
    calls = max(0, reserved.calls - 1)
    # with no call left the sum is exactly zero, not what float subtractions leave of it
    return Reserved(max(0.0, reserved.usd - worst) if calls else 0.0, calls)
