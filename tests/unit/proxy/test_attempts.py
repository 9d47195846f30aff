"""proxy/flow/attempts.py with fake legs and a fake clock: retries, back-off, Retry-After, the
deadline, the breaker, and what a failure leaves in it."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import orjson
import pytest

from policies.model import BreakerSettings, RetrySettings
from proxy.clock import Clock
from proxy.errors import (
    UpstreamDropped,
    UpstreamError,
    UpstreamNotConnected,
    UpstreamStatus,
    UpstreamUnavailable,
)
from proxy.flow.attempts import TargetRefused, attempt, relayed
from proxy.flow.whole import Whole
from proxy.legs.answer import Answer
from proxy.legs.breaker import Breaker
from tests.fakes import FakeClock

SECRET = "my patient Jane Roe, diagnosis X"


def echoing_failure(status: int) -> UpstreamError:
    """A provider's error that echoes the request's text back."""
    body = orjson.dumps({"error": {"message": f"cannot process: {SECRET}"}})
    return UpstreamStatus("mini", status, body, {})


@pytest.mark.parametrize(
    "error",
    [echoing_failure(500), echoing_failure(503), UpstreamUnavailable(f"mini: reset: {SECRET}")],
    ids=["500", "503", "unavailable"],
)
async def test_a_breaker_keeps_no_text_of_the_request_that_failed(error: UpstreamError) -> None:
    assert SECRET in error.message + error.detail  # the failing request's own error says it
    breaker = Breaker(BreakerSettings(consecutive_failures=1))

    async def failing() -> Answer:
        raise error

    with pytest.raises(UpstreamError):
        await attempt(failing, breaker, RetrySettings(attempts=1), time.monotonic() + 10, Clock())
    assert breaker.state == "open"
    assert breaker.last_failure
    assert SECRET not in breaker.last_failure


@dataclass
class Leg:
    """A target that answers from a script: an error to raise, or an answer's chunks."""

    script: list[UpstreamError | list[bytes] | Streamed]
    calls: int = 0

    async def open(self) -> Answer:
        step = self.script[min(self.calls, len(self.script) - 1)]
        self.calls += 1
        if isinstance(step, UpstreamError):
            raise step
        return step if isinstance(step, Streamed) else Streamed(step)


@dataclass
class Streamed:
    parts: list[bytes]
    stream: bool = True
    status: int = 200

    def headers(self) -> list[tuple[bytes, bytes]]:
        return []

    async def read(self) -> bytes:
        if b"!" in self.parts:
            raise UpstreamDropped("leg: connection lost mid-answer")
        return b"".join(self.parts)

    async def chunks(self) -> AsyncIterator[bytes]:
        for part in self.parts:
            if part == b"!":
                raise UpstreamUnavailable("leg: reset before the first byte")
            yield part

    def close(self) -> None:
        pass


STEADY = RetrySettings(attempts=4, initial_backoff_s=0.1, max_backoff_s=2.0, jitter=False)


def unavailable() -> UpstreamError:
    return UpstreamUnavailable("leg: connection refused")


def status(code: int, retry_after: str = "") -> UpstreamError:
    headers = {"Retry-After": retry_after} if retry_after else {}
    return UpstreamStatus("leg", code, b'{"error": {"message": "no"}}', headers)


async def test_retryable_failures_back_off_exponentially_until_one_answers() -> None:
    fake = FakeClock()
    leg = Leg([unavailable(), status(502), status(503), [b"a", b"b"]])
    opened = await attempt(leg.open, Breaker(BreakerSettings()), STEADY, fake.t + 60, fake.clock)
    assert leg.calls == 4
    assert fake.slept == [0.1, 0.2, 0.4]
    assert opened.first == b"a"
    assert opened.rest is not None
    assert [c async for c in opened.rest] == [b"b"]


async def test_retries_stop_after_the_allowed_attempts_with_the_last_error() -> None:
    fake = FakeClock()
    leg = Leg([unavailable()])
    settings = dataclasses.replace(STEADY, attempts=3)
    with pytest.raises(UpstreamUnavailable):
        await attempt(leg.open, Breaker(BreakerSettings()), settings, fake.t + 60, fake.clock)
    assert leg.calls == 3
    assert fake.slept == [0.1, 0.2]


async def test_the_back_off_is_capped() -> None:
    fake = FakeClock()
    settings = dataclasses.replace(STEADY, attempts=6, max_backoff_s=0.5)
    patient = Breaker(BreakerSettings(consecutive_failures=10))
    with pytest.raises(UpstreamUnavailable):
        await attempt(Leg([unavailable()]).open, patient, settings, fake.t + 60, fake.clock)
    assert fake.slept == [0.1, 0.2, 0.4, 0.5, 0.5]


async def test_a_breaker_that_opens_midway_ends_the_retries() -> None:
    fake = FakeClock()
    leg = Leg([unavailable()])
    breaker = Breaker(BreakerSettings(consecutive_failures=2))
    with pytest.raises(TargetRefused):
        await attempt(leg.open, breaker, STEADY, fake.t + 60, fake.clock)
    assert leg.calls == 2
    assert breaker.state == "open"


async def test_a_429s_retry_after_is_the_wait_within_the_cap() -> None:
    fake = FakeClock()
    leg = Leg([status(429, "1.5"), status(429, "30"), [b"ok"]])
    await attempt(leg.open, Breaker(BreakerSettings()), STEADY, fake.t + 60, fake.clock)
    assert fake.slept == [1.5, 2.0]  # the provider's word, never longer than max_backoff_s


async def test_no_retry_whose_wait_would_end_past_the_deadline() -> None:
    fake = FakeClock()
    leg = Leg([unavailable(), unavailable(), [b"late"]])
    with pytest.raises(UpstreamUnavailable):
        await attempt(leg.open, Breaker(BreakerSettings()), STEADY, fake.t + 0.25, fake.clock)
    assert leg.calls == 2  # waited 0.1; the next 0.2 would end at 0.3 > 0.25
    assert fake.slept == [0.1]


async def test_a_client_error_is_not_retried_and_leaves_the_breaker_closed() -> None:
    fake = FakeClock()
    leg = Leg([status(400), [b"never"]])
    breaker = Breaker(BreakerSettings(consecutive_failures=1))
    with pytest.raises(UpstreamStatus):
        await attempt(leg.open, breaker, STEADY, fake.t + 60, fake.clock)
    assert leg.calls == 1
    assert fake.slept == []
    assert breaker.state == "closed"


async def test_a_stream_that_breaks_before_its_first_chunk_is_tried_again() -> None:
    fake = FakeClock()
    leg = Leg([[b"!"], [b"first", b"second"]])
    opened = await attempt(leg.open, Breaker(BreakerSettings()), STEADY, fake.t + 60, fake.clock)
    assert leg.calls == 2
    assert opened.first == b"first"


async def test_an_open_breaker_refuses_without_calling_until_open_s_has_passed() -> None:
    fake = FakeClock()
    breaker = Breaker(BreakerSettings(consecutive_failures=1, open_s=5.0))
    once = dataclasses.replace(STEADY, attempts=1)
    with pytest.raises(UpstreamUnavailable):
        await attempt(Leg([unavailable()]).open, breaker, once, fake.t + 60, fake.clock)
    leg = Leg([[b"back"]])
    with pytest.raises(TargetRefused):
        await attempt(leg.open, breaker, once, fake.t + 60, fake.clock)
    assert leg.calls == 0
    fake.t += 5.0
    opened = await attempt(leg.open, breaker, once, fake.t + 60, fake.clock)
    assert opened.first == b"back"
    assert breaker.state == "half_open"


class Held:
    """What a target holds while its body passes (an in-flight count, in the chain)."""

    def __init__(self) -> None:
        self.entered = 0
        self.holding = False

    def __enter__(self) -> None:
        self.entered += 1
        self.holding = True

    def __exit__(self, *exc: object) -> None:
        self.holding = False


async def test_a_stream_that_breaks_midway_counts_against_the_target() -> None:
    fake = FakeClock()
    breaker = Breaker(BreakerSettings(consecutive_failures=1))
    opened = await attempt(Leg([[b"a", b"!"]]).open, breaker, STEADY, fake.t + 60, fake.clock)
    with pytest.raises(UpstreamUnavailable):
        _ = [chunk async for chunk in relayed(opened, breaker, fake.clock, Held())]
    assert breaker.state == "open"


async def test_a_whole_answer_relayed_counts_for_the_target() -> None:
    fake = FakeClock()
    breaker = Breaker(BreakerSettings(consecutive_failures=1))
    breaker.record_failure(fake.t, "earlier")  # open
    fake.t += BreakerSettings().open_s
    once = dataclasses.replace(STEADY, attempts=1)
    opened = await attempt(Leg([[b"x", b"y"]]).open, breaker, once, fake.t + 60, fake.clock)
    held = Held()
    body = relayed(opened, breaker, fake.clock, held)
    assert await anext(body) == b"x"
    assert held.holding  # the target is held while its body passes
    assert [chunk async for chunk in body] == [b"y"]
    assert not held.holding
    assert held.entered == 1
    assert breaker.probe_successes == 1  # a half-open probe that succeeded


async def test_a_whole_answer_whose_body_breaks_counts_against_the_target_untried() -> None:
    # Its answer had begun: the engine did the work, so it is not asked again (as nginx does
    # not retry once a response has begun), but the failure is the target's.
    fake = FakeClock()
    breaker = Breaker(BreakerSettings(consecutive_failures=1))
    leg = Leg([Streamed([b"!"], stream=False), Streamed([b"{}"], stream=False)])
    with pytest.raises(UpstreamDropped):
        await attempt(leg.open, breaker, STEADY, fake.t + 60, fake.clock)
    assert leg.calls == 1
    assert breaker.state == "open"


async def test_a_whole_answer_is_in_hand_and_its_target_released_before_delivery() -> None:
    fake = FakeClock()
    breaker = Breaker(BreakerSettings(consecutive_failures=1))
    breaker.record_failure(fake.t, "earlier")  # open
    fake.t += BreakerSettings().open_s
    once = dataclasses.replace(STEADY, attempts=1)
    whole = Streamed([b'{"id": ', b'"x"}'], stream=False)
    opened = await attempt(Leg([whole]).open, breaker, once, fake.t + 60, fake.clock)
    held = Held()
    body = relayed(opened, breaker, fake.clock, held)
    assert held.entered == 1
    assert not held.holding  # the engine is done: nothing of it is held while the client reads
    assert breaker.probe_successes == 1
    assert isinstance(body, Whole)
    assert body.body == b'{"id": "x"}'
    assert [chunk async for chunk in body] == [b'{"id": "x"}']


async def test_a_client_that_leaves_midway_says_nothing_about_the_target() -> None:
    fake = FakeClock()
    breaker = Breaker(BreakerSettings(consecutive_failures=1, half_open_probes=1))
    breaker.record_failure(fake.t, "earlier")
    fake.t += BreakerSettings().open_s
    once = dataclasses.replace(STEADY, attempts=1)
    opened = await attempt(Leg([[b"x", b"y", b"z"]]).open, breaker, once, fake.t + 60, fake.clock)
    assert breaker.probes_in_flight == 1
    held = Held()
    body = relayed(opened, breaker, fake.clock, held)
    assert await anext(body) == b"x"
    await body.aclose()  # the client went away
    assert not held.holding  # released at once
    assert breaker.state == "half_open"
    assert breaker.probes_in_flight == 0  # its probe slot is free again, no verdict


def test_an_open_breaker_reads_half_open_once_open_s_has_passed() -> None:
    breaker = Breaker(BreakerSettings(consecutive_failures=1, open_s=5.0))
    breaker.record_failure(100.0, "down")
    assert breaker.state_at(104.9) == "open"
    assert breaker.state_at(105.0) == "half_open"
    assert breaker.state == "open"  # reading it changes nothing


@pytest.mark.parametrize(("elsewhere", "calls"), [(True, 1), (False, 4)])
async def test_a_target_never_connected_to_is_left_at_once_when_another_could_take_it(
    elsewhere: bool, calls: int
) -> None:
    fake = FakeClock()
    leg = Leg([UpstreamNotConnected("leg: connection refused")])
    with pytest.raises(UpstreamNotConnected):
        await attempt(
            leg.open, Breaker(BreakerSettings()), STEADY, fake.t + 60, fake.clock, elsewhere
        )
    assert leg.calls == calls
