"""Has a tenant spent its cloud budget for this period (pure)? Periods are calendar ones in UTC
(the hour, the day, the week from Monday, the month), so "5 USD a day" resets at midnight UTC,
as providers' own budgets do. Spend past the budget closes the cloud to the tenant until the
next period; requests already in flight when it ran out may overshoot it by their own cost.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Literal

Period = Literal["hour", "day", "week", "month"]
PERIODS: tuple[Period, ...] = ("hour", "day", "week", "month")


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
