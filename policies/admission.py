"""May a tenant's request start now (pure)? Token buckets for requests and tokens per minute,
and a cap on requests in flight. Each bucket holds one minute's worth and refills continuously.

A request is charged its estimated tokens at admission (prompt plus the answer's budget) and
corrected once its real usage is known, so a tenant that asks for 4096 tokens and uses 50 pays
50. A request larger than a whole minute's worth waits for a full bucket rather than never
starting, then leaves the bucket in debt: the tenant's long-run rate still holds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from policies.model import Limits

_ROUNDING = 1e-9


@dataclass(frozen=True)
class Bucket:
    level: float  # what may be spent now; negative after a correction left a debt
    at: float  # monotonic seconds of that level

    def refilled(self, per_minute: int, now: float) -> Bucket:
        level = min(float(per_minute), self.level + (now - self.at) * per_minute / 60.0)
        return Bucket(level, now)

    def wait_for(self, amount: float, per_minute: int) -> float:
        """Seconds until `amount` is available (0 if it is, to float rounding: a client that
        waited exactly the Retry-After it was given must get in)."""
        missing = amount - self.level
        return 0.0 if missing <= _ROUNDING else missing * 60.0 / per_minute


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


def admit(
    load: TenantLoad, limits: Limits, tenant: str, tokens: int, now: float
) -> TenantLoad | Refusal:
    """The tenant's load with this request admitted, or why it may not start now."""
    if limits.max_concurrent is not None and load.in_flight >= limits.max_concurrent:
        return Refusal("max_concurrent", CONCURRENCY_RETRY_S,
                       f"tenant {tenant!r} already has {load.in_flight} requests in flight, its "
                       f"limit (max_concurrent = {limits.max_concurrent})")  # fmt: skip
    requests = _current(load.requests, limits.requests_per_minute, now)
    waits = []
    if requests is not None and limits.requests_per_minute is not None:
        waits.append(("requests_per_minute", requests.wait_for(1, limits.requests_per_minute),
                      f"{limits.requests_per_minute} requests per minute"))  # fmt: skip
    tokens_bucket = _current(load.tokens, limits.tokens_per_minute, now)
    charge = float(tokens)
    if tokens_bucket is not None and limits.tokens_per_minute is not None:
        charge = min(charge, float(limits.tokens_per_minute))
        waits.append(("tokens_per_minute", tokens_bucket.wait_for(charge, limits.tokens_per_minute),
                      f"{limits.tokens_per_minute} tokens per minute (this request: about "
                      f"{tokens})"))  # fmt: skip
    limit, wait, what = max(waits, key=lambda w: w[1], default=("", 0.0, ""))
    if wait > 0:
        return Refusal(limit, wait, f"tenant {tenant!r} is over its limit of {what}; "
                                    f"retry in {wait:.1f} s")  # fmt: skip
    return TenantLoad(
        _spent(requests, 1.0),
        _spent(tokens_bucket, charge),
        load.in_flight + 1,
    )


def charged(limits: Limits, tokens: int) -> int:
    """What admission takes from the token bucket for an estimate of `tokens`."""
    per_minute = limits.tokens_per_minute
    return tokens if per_minute is None else min(tokens, per_minute)


def settle(
    load: TenantLoad, limits: Limits, charge: int, used: int | None, now: float
) -> TenantLoad:
    """The request ended: it leaves the in-flight count, and its token charge becomes what it
    used (None: unknown, the estimate stands)."""
    load = replace(load, in_flight=max(0, load.in_flight - 1))
    if used is None or load.tokens is None or limits.tokens_per_minute is None:
        return load
    bucket = load.tokens.refilled(limits.tokens_per_minute, now)
    level = min(float(limits.tokens_per_minute), bucket.level + charge - used)
    return replace(load, tokens=Bucket(level, now))


def _current(bucket: Bucket | None, per_minute: int | None, now: float) -> Bucket | None:
    if per_minute is None:
        return None
    if bucket is None:  # a tenant's first request: a full minute's worth
        return Bucket(float(per_minute), now)
    return bucket.refilled(per_minute, now)


def _spent(bucket: Bucket | None, amount: float) -> Bucket | None:
    return None if bucket is None else Bucket(bucket.level - amount, bucket.at)
