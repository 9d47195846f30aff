"""policies/admission.py: token buckets for requests and tokens per minute, requests in flight.
Pure maths: every call gets its `now` explicitly."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policies.admission import (
    CONCURRENCY_RETRY_S,
    Bucket,
    Rate,
    Refusal,
    TenantLoad,
    admit,
    charged,
    settle,
)
from policies.model import Limits


def admitted(load: TenantLoad, limits: Limits, tokens: int = 0, now: float = 0.0) -> TenantLoad:
    verdict = admit(load, limits, "acme", tokens, now)
    assert isinstance(verdict, TenantLoad), verdict
    return verdict


def refused(load: TenantLoad, limits: Limits, tokens: int = 0, now: float = 0.0) -> Refusal:
    verdict = admit(load, limits, "acme", tokens, now)
    assert isinstance(verdict, Refusal), verdict
    return verdict


def level(load: TenantLoad) -> float:
    assert load.tokens is not None
    return load.tokens.level


def test_a_bucket_refills_at_a_minutes_worth_per_minute_up_to_it() -> None:
    assert Bucket(0.0, 10.0).refilled(Rate(60, 60), 15.0) == Bucket(5.0, 15.0)
    assert Bucket(-30.0, 0.0).refilled(Rate(60, 60), 30.0) == Bucket(0.0, 30.0)
    assert Bucket(50.0, 0.0).refilled(Rate(60, 60), 3600.0) == Bucket(60.0, 3600.0)


def test_a_bucket_waits_for_the_missing_amount_at_the_refill_rate() -> None:
    assert Bucket(10.0, 0.0).wait_for(10, Rate(60, 60)) == 0.0
    assert Bucket(10.0, 0.0).wait_for(5, Rate(60, 60)) == 0.0
    assert Bucket(10.0, 0.0).wait_for(40, Rate(60, 60)) == 30.0
    assert Bucket(-20.0, 0.0).wait_for(10, Rate(120, 60)) == 15.0


def test_the_first_request_finds_full_buckets() -> None:
    limits = Limits(requests_per_minute=3, tokens_per_minute=1000, burst_s=60)
    load = admitted(TenantLoad(), limits, tokens=1000, now=42.0)
    assert load == TenantLoad(Bucket(2.0, 42.0), Bucket(0.0, 42.0), in_flight=1)


def test_a_request_rate_admits_a_burst_then_refuses_until_one_request_refilled() -> None:
    limits = Limits(requests_per_minute=3, burst_s=60)
    load = TenantLoad()
    for _ in range(3):
        load = admitted(load, limits)
    refusal = refused(load, limits)
    assert (refusal.limit, refusal.retry_after_s) == ("requests_per_minute", 20.0)
    assert refused(load, limits, now=19.9).retry_after_s == pytest.approx(0.1)
    load = admitted(load, limits, now=20.0)
    assert refused(load, limits, now=20.0).retry_after_s == 20.0


def test_a_refusal_leaves_nothing_spent() -> None:
    limits = Limits(requests_per_minute=1, tokens_per_minute=100, burst_s=60)
    load = admitted(TenantLoad(), limits, tokens=10)
    refused(load, limits, tokens=10, now=30.0)
    assert admitted(load, limits, tokens=10, now=60.0).in_flight == 2


def test_a_request_retried_exactly_after_retry_after_is_admitted() -> None:
    limits = Limits(requests_per_minute=11, burst_s=60)
    load = TenantLoad()
    for _ in range(11):
        load = admitted(load, limits)
    admitted(load, limits, now=refused(load, limits).retry_after_s)


def test_a_token_rate_waits_for_the_missing_tokens() -> None:
    limits = Limits(tokens_per_minute=1000, burst_s=60)
    load = admitted(TenantLoad(), limits, tokens=800)
    assert refused(load, limits, tokens=500).retry_after_s == pytest.approx((500 - 200) * 60 / 1000)
    refusal = refused(load, limits, tokens=500, now=6.0)
    assert refusal.limit == "tokens_per_minute"
    assert refusal.retry_after_s == pytest.approx(12.0)
    assert level(admitted(load, limits, tokens=500, now=18.0)) == pytest.approx(0.0)


def test_the_refusal_names_the_limit_with_the_longer_wait() -> None:
    limits = Limits(requests_per_minute=2, tokens_per_minute=100, burst_s=60)
    load = admitted(admitted(TenantLoad(), limits, tokens=10), limits, tokens=10)
    requests = refused(load, limits, tokens=100)  # requests: 30 s, tokens: 20 x 0.6 = 12 s
    assert (requests.limit, requests.retry_after_s) == ("requests_per_minute", 30.0)
    load = admitted(admitted(TenantLoad(), limits, tokens=45), limits, tokens=45)
    tokens = refused(load, limits, tokens=100)  # requests: 30 s, tokens: 90 x 0.6 = 54 s
    assert tokens.limit == "tokens_per_minute"
    assert tokens.retry_after_s == pytest.approx(54.0)


def test_a_rate_refusal_names_the_tenant_and_the_limit_in_words() -> None:
    requests = refused(
        admitted(TenantLoad(), Limits(requests_per_minute=1, burst_s=60)),
        Limits(requests_per_minute=1, burst_s=60),
    )
    assert requests.message == (
        "tenant 'acme' is over its limit of 1 requests per minute; retry in 60.0 s"
    )
    limits = Limits(tokens_per_minute=1000, burst_s=60)
    tokens = refused(admitted(TenantLoad(), limits, tokens=1000), limits, tokens=250)
    assert tokens.message == (
        "tenant 'acme' is over its limit of 1000 tokens per minute (this "
        "request: about 250); retry in 15.0 s"
    )


def test_max_concurrent_refuses_the_request_beyond_the_cap() -> None:
    limits = Limits(max_concurrent=2)
    load = admitted(admitted(TenantLoad(), limits), limits)
    refusal = refused(load, limits)
    assert (refusal.limit, refusal.retry_after_s) == ("max_concurrent", CONCURRENCY_RETRY_S)
    assert refusal.retry_after_s == 1.0
    assert "'acme'" in refusal.message
    assert "2 requests in flight" in refusal.message
    assert "max_concurrent = 2" in refusal.message


def test_a_settled_request_makes_room_for_another() -> None:
    limits = Limits(max_concurrent=1)
    load = admitted(TenantLoad(), limits)
    refused(load, limits)
    load = settle(load, limits, charge=0, used=None, now=0.0)
    assert load.in_flight == 0
    assert admitted(load, limits).in_flight == 1


def test_settle_never_counts_in_flight_below_zero() -> None:
    assert settle(TenantLoad(), Limits(), charge=0, used=None, now=0.0).in_flight == 0
    assert settle(TenantLoad(), Limits(tokens_per_minute=10, burst_s=60), 5, 3, 0.0).in_flight == 0


def test_a_request_that_used_less_than_its_charge_is_refunded() -> None:
    limits = Limits(tokens_per_minute=1000, burst_s=60)
    load = admitted(TenantLoad(), limits, tokens=1000)
    refused(load, limits, tokens=900)
    load = settle(load, limits, charge=1000, used=100, now=0.0)
    assert level(load) == 900.0
    assert admitted(load, limits, tokens=900).in_flight == 1


def test_a_request_that_used_more_than_its_charge_leaves_a_debt() -> None:
    limits = Limits(tokens_per_minute=1000, burst_s=60)
    load = admitted(TenantLoad(), limits, tokens=900)
    load = settle(load, limits, charge=900, used=1500, now=0.0)
    assert level(load) == -500.0
    assert refused(load, limits, tokens=100).retry_after_s == pytest.approx(36.0)


def test_an_unknown_usage_keeps_the_estimate() -> None:
    limits = Limits(tokens_per_minute=1000, burst_s=60)
    load = admitted(TenantLoad(), limits, tokens=400)
    assert settle(load, limits, charge=400, used=None, now=30.0) == TenantLoad(
        load.requests, load.tokens, in_flight=0
    )


def test_settle_refills_the_bucket_up_to_its_time() -> None:
    limits = Limits(tokens_per_minute=600, burst_s=60)
    load = admitted(TenantLoad(), limits, tokens=600)
    assert settle(load, limits, charge=600, used=600, now=30.0).tokens == Bucket(300.0, 30.0)


def test_a_refund_never_fills_the_bucket_beyond_a_minutes_worth() -> None:
    limits = Limits(tokens_per_minute=1000, burst_s=60)
    load = admitted(TenantLoad(), limits, tokens=500)
    assert level(settle(load, limits, charge=500, used=0, now=0.0)) == 1000.0
    assert level(settle(load, limits, charge=500, used=10, now=600.0)) == 1000.0


def test_a_request_larger_than_a_minutes_worth_starts_on_a_full_bucket_then_owes() -> None:
    limits = Limits(tokens_per_minute=1000, burst_s=60)
    assert charged(limits, 5000) == 1000
    assert charged(limits, 300) == 300
    load = admitted(TenantLoad(), limits, tokens=5000)
    assert level(load) == 0.0
    load = settle(load, limits, charge=charged(limits, 5000), used=5000, now=0.0)
    assert level(load) == -4000.0
    refusal = refused(load, limits, tokens=100)
    assert refusal.limit == "tokens_per_minute"
    assert refusal.retry_after_s == pytest.approx(246.0)
    admitted(load, limits, tokens=100, now=246.0)


def test_a_request_larger_than_a_minutes_worth_waits_for_a_full_bucket() -> None:
    limits = Limits(tokens_per_minute=1000, burst_s=60)
    load = admitted(TenantLoad(), limits, tokens=100)
    assert refused(load, limits, tokens=5000).retry_after_s == pytest.approx(6.0)
    assert level(admitted(load, limits, tokens=5000, now=6.0)) == pytest.approx(0.0)


def test_no_limits_admit_anything() -> None:
    load = TenantLoad()
    for now in range(100):
        load = admitted(load, Limits(), tokens=10**9, now=float(now))
    assert load == TenantLoad(None, None, in_flight=100)
    assert charged(Limits(), 10**9) == 10**9


@given(
    rate=st.integers(min_value=1, max_value=30),
    gaps=st.lists(st.floats(min_value=0.0, max_value=20.0), min_size=1, max_size=200),
)
def test_no_minute_admits_more_than_a_burst_and_a_minutes_refill(
    rate: int, gaps: list[float]
) -> None:
    limits = Limits(requests_per_minute=rate, burst_s=60)
    load, now, times = TenantLoad(), 0.0, []
    for gap in gaps:
        now += gap
        verdict = admit(load, limits, "acme", 0, now)
        if isinstance(verdict, TenantLoad):
            load = verdict
            times.append(now)
        assert load.requests is not None
        assert load.requests.level <= rate
    for start in times:
        assert sum(start <= t <= start + 60.0 for t in times) <= 2 * rate


@given(
    limit=st.integers(min_value=1, max_value=10_000),
    steps=st.lists(
        st.tuples(
            st.floats(min_value=0.0, max_value=120.0),
            st.integers(min_value=0, max_value=20_000),
            st.one_of(st.none(), st.integers(min_value=0, max_value=20_000)),
        ),
        max_size=50,
    ),
)
def test_the_token_bucket_never_holds_more_than_a_minutes_worth(
    limit: int, steps: list[tuple[float, int, int | None]]
) -> None:
    limits = Limits(tokens_per_minute=limit, burst_s=60)
    load, now = TenantLoad(), 0.0
    for gap, tokens, used in steps:
        now += gap
        verdict = admit(load, limits, "acme", tokens, now)
        if isinstance(verdict, TenantLoad):
            load = settle(verdict, limits, charged(limits, tokens), used, now)
        assert load.tokens is None or load.tokens.level <= limit
        assert (
            load.tokens is None or load.tokens.refilled(Rate(limit, 60), now + gap).level <= limit
        )


def test_a_bucket_holds_burst_s_of_its_rate_and_at_least_one_request() -> None:
    """The default burst is ten seconds: 120 a minute may come 20 at once, not 120."""
    assert Rate(120, 10.0).capacity == 20.0
    assert Rate(3, 10.0).capacity == 1.0  # never less than one request
    limits = Limits(requests_per_minute=120)  # burst_s 10 by default
    load = TenantLoad()
    for _ in range(20):
        load = admitted(load, limits, tokens=1, now=0.0)
    refusal = admit(load, limits, "t", 1, 0.0)
    assert isinstance(refusal, Refusal)
    assert refusal.retry_after_s == pytest.approx(0.5)  # one request refills in 60/120 s
