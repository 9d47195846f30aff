"""proxy/legs/breaker.py: the circuit breaker state machine, driven with explicit times."""

from __future__ import annotations

from policies.model import BreakerSettings
from proxy.legs.breaker import Breaker, State

# Trips on 3 failures in a row; the failure-rate rule is out of reach (min_calls 1000).
CONSECUTIVE = BreakerSettings(
    consecutive_failures=3,
    failure_rate=0.5,
    min_calls=1000,
    window_s=10.0,
    open_s=5.0,
    half_open_probes=2,
)
# Trips on a 50% failure rate over >= 4 calls in 10 s; the consecutive rule is out of reach.
RATE = BreakerSettings(
    consecutive_failures=1000,
    failure_rate=0.5,
    min_calls=4,
    window_s=10.0,
    open_s=5.0,
    half_open_probes=2,
)


def state(breaker: Breaker) -> State:
    """The state, read through a call so mypy does not narrow it across transitions."""
    return breaker.state


def opened(
    settings: BreakerSettings = CONSECUTIVE, at: float = 100.0, failures: int = 3
) -> Breaker:
    breaker = Breaker(settings)
    for _ in range(failures):
        breaker.record_failure(at, "boom")
    assert state(breaker) == "open"
    return breaker


def half_open(at: float = 105.0) -> Breaker:
    """Opened at 100 by CONSECUTIVE; `at` must be at least 105 (open_s later)."""
    breaker = opened()
    assert breaker.allow(at)
    breaker.release()  # the slot was only taken to get into half-open
    assert state(breaker) == "half_open"
    return breaker


def test_a_new_breaker_is_closed_and_allows() -> None:
    breaker = Breaker(CONSECUTIVE)
    assert state(breaker) == "closed"
    assert breaker.allow(0.0)
    assert breaker.would_allow(0.0)


def test_failures_below_the_consecutive_limit_keep_it_closed() -> None:
    breaker = Breaker(CONSECUTIVE)
    breaker.record_failure(1.0, "a")
    breaker.record_failure(2.0, "b")
    assert state(breaker) == "closed"
    assert breaker.consecutive_failures == 2
    assert breaker.allow(2.0)


def test_consecutive_failures_open_it_and_remember_when_and_why() -> None:
    breaker = Breaker(CONSECUTIVE)
    for now, reason in ((1.0, "a"), (2.0, "b"), (3.0, "connection refused")):
        breaker.record_failure(now, reason)
    assert state(breaker) == "open"
    assert breaker.opened_at == 3.0
    assert breaker.last_failure == "connection refused"


def test_a_success_resets_the_consecutive_count() -> None:
    breaker = Breaker(CONSECUTIVE)
    breaker.record_failure(1.0, "a")
    breaker.record_failure(2.0, "b")
    breaker.record_success(3.0)
    assert breaker.consecutive_failures == 0
    breaker.record_failure(4.0, "c")
    breaker.record_failure(5.0, "d")
    assert state(breaker) == "closed"
    breaker.record_failure(6.0, "e")
    assert state(breaker) == "open"


def test_failure_rate_does_not_trip_below_min_calls() -> None:
    breaker = Breaker(RATE)
    for now in (1.0, 2.0, 3.0):
        breaker.record_failure(now, "x")
    assert state(breaker) == "closed"  # 100% failures, but only 3 calls


def test_failure_rate_trips_once_the_window_holds_min_calls() -> None:
    breaker = Breaker(RATE)
    breaker.record_success(1.0)
    breaker.record_failure(2.0, "x")
    breaker.record_success(3.0)
    assert state(breaker) == "closed"
    breaker.record_failure(4.0, "x")  # 2 of 4 failed: exactly the rate
    assert state(breaker) == "open"
    assert breaker.opened_at == 4.0


def test_failure_rate_below_the_threshold_keeps_it_closed() -> None:
    breaker = Breaker(RATE)
    for now, ok in ((1.0, True), (2.0, True), (3.0, False), (4.0, True), (5.0, False)):
        if ok:
            breaker.record_success(now)
        else:
            breaker.record_failure(now, "x")
    assert state(breaker) == "closed"  # 2 of 5 = 40%


def test_calls_older_than_the_window_no_longer_count() -> None:
    breaker = Breaker(RATE)
    breaker.record_failure(0.0, "x")
    breaker.record_failure(1.0, "x")
    breaker.record_success(2.0)
    breaker.record_success(13.0)  # the three above are older than 10 s now
    breaker.record_failure(14.0, "x")
    assert [when for when, _ in breaker.window] == [13.0, 14.0]
    assert state(breaker) == "closed"  # 3 of 5 would have tripped; 1 of 2 is below min_calls


def test_a_call_exactly_window_s_old_still_counts() -> None:
    breaker = Breaker(RATE)
    breaker.record_failure(0.0, "x")
    breaker.record_success(5.0)
    breaker.record_success(6.0)
    breaker.record_failure(10.0, "x")
    assert state(breaker) == "open"


def test_open_refuses_until_open_s_has_passed() -> None:
    breaker = opened(at=100.0)
    assert not breaker.would_allow(104.9)
    assert not breaker.allow(104.9)
    assert state(breaker) == "open"
    assert breaker.allow(105.0)
    assert state(breaker) == "half_open"


def test_would_allow_after_open_s_does_not_change_the_state() -> None:
    breaker = opened(at=100.0)
    assert breaker.would_allow(106.0)
    assert state(breaker) == "open"
    assert breaker.probes_in_flight == 0


def test_half_open_lets_exactly_the_probe_count_through() -> None:
    breaker = opened(at=100.0)
    assert [breaker.allow(106.0) for _ in range(4)] == [True, True, False, False]
    assert breaker.probes_in_flight == 2


def test_would_allow_does_not_take_a_probe_slot() -> None:
    breaker = half_open()
    assert all(breaker.would_allow(106.0) for _ in range(5))
    assert breaker.probes_in_flight == 0
    assert breaker.allow(106.0)
    assert breaker.would_allow(106.0)
    assert breaker.allow(106.0)
    assert not breaker.would_allow(106.0)


def test_probe_successes_close_it_again() -> None:
    breaker = half_open()
    assert breaker.allow(106.0)
    assert breaker.allow(106.0)
    breaker.record_success(107.0)
    assert state(breaker) == "half_open"
    breaker.record_success(108.0)
    assert state(breaker) == "closed"
    assert breaker.allow(108.0)
    assert breaker.allow(108.0)
    assert breaker.allow(108.0)  # closed: no probe limit


def test_closing_forgets_the_failures_that_opened_it() -> None:
    breaker = opened(RATE, at=100.0, failures=4)  # tripped by the failure rate
    assert breaker.allow(105.0)
    assert breaker.allow(105.0)
    breaker.record_success(105.5)
    breaker.record_success(106.0)
    assert state(breaker) == "closed"
    breaker.record_failure(107.0, "x")
    breaker.record_failure(107.5, "x")
    breaker.record_failure(108.0, "x")
    assert state(breaker) == "closed"  # 3 calls since closing: below min_calls


def test_a_failure_in_half_open_reopens_with_a_fresh_opened_at() -> None:
    breaker = half_open(at=105.0)
    assert breaker.allow(106.0)
    breaker.record_failure(107.0, "still down")
    assert state(breaker) == "open"
    assert breaker.opened_at == 107.0
    assert breaker.last_failure == "still down"
    assert not breaker.allow(111.9)  # 105 + open_s has passed, but not 107 + open_s
    assert breaker.allow(112.0)


def test_a_failure_after_one_probe_success_still_reopens() -> None:
    breaker = half_open()
    breaker.allow(106.0)
    breaker.allow(106.0)
    breaker.record_success(106.5)
    breaker.record_failure(107.0, "x")
    assert state(breaker) == "open"
    assert breaker.probes_in_flight == 0


def test_reopening_resets_the_probe_count_for_the_next_half_open() -> None:
    breaker = half_open()
    breaker.allow(106.0)
    breaker.record_success(106.5)
    breaker.record_failure(107.0, "x")
    assert [breaker.allow(112.0) for _ in range(3)] == [True, True, False]
    breaker.record_success(112.5)
    assert state(breaker) == "half_open"  # the success before reopening does not count
    breaker.record_success(113.0)
    assert state(breaker) == "closed"


def test_release_frees_a_probe_slot() -> None:
    breaker = half_open()
    assert breaker.allow(106.0)
    assert breaker.allow(106.0)
    assert not breaker.allow(106.0)
    breaker.release()
    assert breaker.probes_in_flight == 1
    assert breaker.allow(106.0)
    assert state(breaker) == "half_open"


def test_release_is_harmless_when_closed_or_with_no_probes() -> None:
    closed = Breaker(CONSECUTIVE)
    closed.release()
    assert (state(closed), closed.probes_in_flight) == ("closed", 0)
    probing = half_open()
    probing.release()
    assert probing.probes_in_flight == 0


def test_a_single_probe_setting_closes_after_one_success() -> None:
    settings = BreakerSettings(consecutive_failures=1, open_s=1.0, half_open_probes=1)
    breaker = Breaker(settings)
    breaker.record_failure(0.0, "x")
    assert state(breaker) == "open"
    assert breaker.allow(1.0)
    assert not breaker.allow(1.0)
    breaker.record_success(1.5)
    assert state(breaker) == "closed"
