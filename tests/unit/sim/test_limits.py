from __future__ import annotations

import pytest

from proxy.sim.limits import RequestRateLimit


def drain(limit: RequestRateLimit, now: float) -> int:
    """Acquire until refused; how many went ahead."""
    admitted = 0
    while limit.try_acquire(now) is None:
        admitted += 1
        assert admitted <= 10_000
    return admitted


def test_a_fresh_bucket_admits_a_full_minute_of_requests_at_once() -> None:
    assert drain(RequestRateLimit(per_minute=30), now=100.0) == 30


def test_an_empty_bucket_says_how_long_until_the_next_request() -> None:
    limit = RequestRateLimit(per_minute=30)
    drain(limit, now=0.0)
    assert limit.try_acquire(0.0) == pytest.approx(2.0)


def test_the_wait_accounts_for_a_partly_refilled_token() -> None:
    limit = RequestRateLimit(per_minute=60)
    drain(limit, now=0.0)
    assert limit.try_acquire(0.25) == pytest.approx(0.75)


def test_a_refused_request_does_not_consume_a_token() -> None:
    limit = RequestRateLimit(per_minute=60)
    drain(limit, now=0.0)
    assert limit.try_acquire(0.5) is not None
    assert limit.try_acquire(1.0) is None


def test_the_bucket_refills_at_per_minute_over_sixty() -> None:
    limit = RequestRateLimit(per_minute=60)
    drain(limit, now=0.0)
    assert drain(limit, now=10.0) == 10


def test_the_bucket_never_holds_more_than_a_minute_of_requests() -> None:
    limit = RequestRateLimit(per_minute=60)
    drain(limit, now=0.0)
    assert drain(limit, now=3600.0) == 60


@pytest.mark.parametrize("per_minute", [60, 30, 17])
def test_a_request_after_exactly_the_returned_wait_goes_ahead(per_minute: int) -> None:
    limit = RequestRateLimit(per_minute=per_minute)
    drain(limit, now=0.0)
    wait = limit.try_acquire(0.0)
    assert wait is not None
    assert limit.try_acquire(wait) is None
