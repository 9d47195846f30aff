"""May a tenant's request start now (pure)? Token buckets for requests and tokens per minute,
and a cap on requests in flight.

A bucket refills continuously at the per-minute rate and holds `burst_s` seconds of it (at
least one request): a tenant idle for a while may send a short burst, never a whole minute's
worth at once, which would crowd the engines for everyone else (providers enforce per-minute
limits over such short windows too).

A request is charged its estimated tokens at admission (prompt plus the answer's budget) and
corrected once its real usage is known, so a tenant that asks for 4096 tokens and uses 50 pays
50. A request larger than the bucket waits for a full bucket rather than never starting, then
leaves the bucket in debt: the tenant's long-run rate still holds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from policies.model import Limits

_ROUNDING = 1e-9


@dataclass(frozen=True)
class Rate:
    per_minute: int
    burst_s: float

    @property
    def capacity(self) -> float:
        return max(1.0, self.per_minute * self.burst_s / 60.0)

    @property
    def per_second(self) -> float:
        return self.per_minute / 60.0


@dataclass(frozen=True)
class Bucket:
    level: float  # what may be spent now; negative after a correction left a debt
    at: float  # monotonic seconds of that level

    def refilled(self, rate: Rate, now: float) -> Bucket:
        level = min(rate.capacity, self.level + (now - self.at) * rate.per_second)
        return Bucket(level, now)

    def wait_for(self, amount: float, rate: Rate) -> float:
        """Seconds until `amount` is available (0 if it is, to float rounding: a client that
        waited exactly the Retry-After it was given must get in)."""
        missing = amount - self.level
        return 0.0 if missing <= _ROUNDING else missing / rate.per_second


@dataclass(frozen=True)
class TenantLoad:
    """One tenant's buckets and requests in flight (the proxy keeps one per tenant)."""

    requests: Bucket | None = None
    tokens: Bucket | None = None
    in_flight: int = 0


@dataclass(frozen=True)
class Refusal:
    limit: str  # the policy key: requests_per_minute, tokens_per_minute, max_concurrent
    retry_after_s: float
    message: str


# Nothing tells when a request in flight will end; a client told to come back in a second
# retries about as soon as one typically does.
CONCURRENCY_RETRY_S = 1.0


def request_rate(limits: Limits) -> Rate | None:
    per_minute = limits.requests_per_minute
    return None if per_minute is None else Rate(per_minute, limits.burst_s)


def token_rate(limits: Limits) -> Rate | None:
    per_minute = limits.tokens_per_minute
    return None if per_minute is None else Rate(per_minute, limits.burst_s)


def admit(
    load: TenantLoad, limits: Limits, tenant: str, tokens: int, now: float
) -> TenantLoad | Refusal:
    """The tenant's load with this request admitted, or why it may not start now."""
    if limits.max_concurrent is not None and load.in_flight >= limits.max_concurrent:
        return Refusal(
            "max_concurrent",
            CONCURRENCY_RETRY_S,
            f"tenant {tenant!r} already has {load.in_flight} requests in flight, its "
            f"limit (max_concurrent = {limits.max_concurrent})",
        )
    waits: list[tuple[str, float, str]] = []
    rate = request_rate(limits)
    requests = _current(load.requests, rate, now)
    if requests is not None and rate is not None:
        waits.append(
            (
                "requests_per_minute",
                requests.wait_for(1, rate),
                f"{rate.per_minute} requests per minute",
            )
        )
    rate = token_rate(limits)
    budget = _current(load.tokens, rate, now)
    charge = float(charged(limits, tokens))
    if budget is not None and rate is not None:
        waits.append(
            (
                "tokens_per_minute",
                budget.wait_for(charge, rate),
                f"{rate.per_minute} tokens per minute (this request: about {tokens})",
            )
        )
    limit, wait, what = max(waits, key=lambda w: w[1], default=("", 0.0, ""))
    if wait > 0:
        return Refusal(
            limit, wait, f"tenant {tenant!r} is over its limit of {what}; retry in {wait:.1f} s"
        )
    return TenantLoad(_spent(requests, 1.0), _spent(budget, charge), load.in_flight + 1)


def charged(limits: Limits, tokens: int) -> int:
    """What admission takes from the token bucket for an estimate of `tokens`: at most what
    the bucket holds."""
    rate = token_rate(limits)
    return tokens if rate is None else min(tokens, int(rate.capacity))


def settle(
    load: TenantLoad, limits: Limits, charge: int, used: int | None, now: float
) -> TenantLoad:
    """The request ended: it leaves the in-flight count, and its token charge becomes what it
    used (None: unknown, the estimate stands)."""
    load = replace(load, in_flight=max(0, load.in_flight - 1))
    rate = token_rate(limits)
    if used is None or load.tokens is None or rate is None:
        return load
    bucket = load.tokens.refilled(rate, now)
    level = min(rate.capacity, bucket.level + charge - used)
    return replace(load, tokens=Bucket(level, now))


def _current(bucket: Bucket | None, rate: Rate | None, now: float) -> Bucket | None:
    if rate is None:
        return None
    if bucket is None:  # a tenant's first request: a full bucket
        return Bucket(rate.capacity, now)
    return bucket.refilled(rate, now)


def _spent(bucket: Bucket | None, amount: float) -> Bucket | None:
    return None if bucket is None else Bucket(bucket.level - amount, bucket.at)
