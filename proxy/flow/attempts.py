"""Trying one target: its breaker, retries with backoff before the first byte, the outcome.

tenacity runs the loop: exponential backoff with jitter, only for retryable errors (connection
failures, 5xx, 429 whose Retry-After is honoured), within the request's deadline. For a stream,
an attempt succeeds only once the first chunk has arrived: until then nothing reached the client,
so a retry, or the next target, is still invisible to it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    stop_any,
    wait_exponential_jitter,
)
from tenacity.stop import stop_base

from policies.model import RetrySettings
from proxy.clock import Clock
from proxy.errors import APIError, UpstreamError, UpstreamNotConnected
from proxy.flow.whole import Whole
from proxy.legs.answer import Answer
from proxy.legs.breaker import Breaker


@dataclass
class Opened:
    """A target's answer, with a whole answer's body or a stream's first chunk in hand."""

    answer: Answer
    first: bytes  # a whole answer's body, or a stream's first chunk
    rest: AsyncIterator[bytes] | None  # a stream's other chunks; None for a whole answer


class TargetRefused(Exception):
    """The target's breaker is open: move on to the next one without calling it."""


class _PastDeadline(stop_base):
    """Stop when the next back-off would end after the request's deadline."""

    def __init__(self, settings: RetrySettings, deadline: float, clock: Clock) -> None:
        self.wait = _wait(settings)
        self.deadline = deadline
        self.clock = clock

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self.clock.now() + self.wait(retry_state) >= self.deadline


def retryable(error: BaseException) -> bool:
    return isinstance(error, UpstreamError) and error.retryable


def _wait(settings: RetrySettings) -> Callable[[RetryCallState], float]:
    backoff = wait_exponential_jitter(
        multiplier=settings.initial_backoff_s,  # the first wait (tenacity's name for it)
        max=settings.max_backoff_s,
        exp_base=settings.multiplier,
        jitter=settings.initial_backoff_s if settings.jitter else 0,
    )

    def wait(state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        retry_after = error.headers.get("Retry-After") if isinstance(error, APIError) else None
        if retry_after and retry_after.replace(".", "", 1).isdigit():
            return min(float(retry_after), settings.max_backoff_s)
        return float(backoff(state))

    return wait


async def attempt(
    open_answer: Callable[[], Awaitable[Answer]],
    breaker: Breaker,
    settings: RetrySettings,
    deadline: float,
    clock: Clock,
    elsewhere: bool = False,
) -> Opened:
    """Open the target (retrying as allowed) and, for a stream, receive its first chunk.
    `deadline` is a reading of `clock.now`. With `elsewhere` (another target could take the
    request), a target that could not even be connected to is left at once, as nginx's and
    Envoy's retries move to the next host: retried here only when it is the last one."""

    def retry_here(error: BaseException) -> bool:
        return retryable(error) and not (elsewhere and isinstance(error, UpstreamNotConnected))

    # The first try goes without the retry machinery (most requests need one, and tenacity's
    # set-up cost a tenth of a millisecond per request); a failure worth retrying is handed to
    # tenacity as its first attempt's outcome, so waits, Retry-After and stops are the same.
    try:
        return await _once(open_answer, breaker, clock)
    except Exception as error:
        if not retry_here(error):
            raise
        failed: list[Exception] = [error]

    async def again() -> Opened:
        if failed:
            raise failed.pop()
        return await _once(open_answer, breaker, clock)

    retrying = AsyncRetrying(
        stop=stop_any(
            stop_after_attempt(settings.attempts), _PastDeadline(settings, deadline, clock)
        ),
        wait=_wait(settings),
        retry=retry_if_exception(retry_here),
        sleep=clock.sleep,
        reraise=True,
    )
    async for try_ in retrying:
        with try_:
            return await again()
    raise AssertionError("unreachable: tenacity either returns or raises")  # pragma: no cover


async def _once(
    open_answer: Callable[[], Awaitable[Answer]], breaker: Breaker, clock: Clock
) -> Opened:
    if not breaker.allow(clock.now()):
        raise TargetRefused(breaker.last_failure or "breaker open")
    try:
        answer = await open_answer()
        if not answer.stream:  # read here: its target is done with it before it is delivered
            return Opened(answer, await answer.read(), None)
        chunks = answer.chunks()
        first = await anext(chunks, b"")
    except BaseException as error:
        _verdict(breaker, clock, error)
        raise
    return Opened(answer, first, chunks)


def relayed(
    opened: Opened, breaker: Breaker, clock: Clock, held: AbstractContextManager[object]
) -> AsyncIterator[bytes]:
    """The opened answer's body, within `held` (what the target holds, its in-flight count,
    until the body has passed or the client left); the breaker learns how it ended (a stream
    can still fail midway, after the attempt counted as a success so far). A whole answer was
    read in the attempt: the target is done with it already."""
    if opened.rest is None:
        with held:
            _verdict(breaker, clock, None)
        return Whole(opened.first)
    return _relayed_stream(opened.first, opened.rest, breaker, clock, held)


async def _relayed_stream(
    first: bytes,
    rest: AsyncIterator[bytes],
    breaker: Breaker,
    clock: Clock,
    held: AbstractContextManager[object],
) -> AsyncIterator[bytes]:
    with held:
        try:
            if first:
                yield first
            async with contextlib.aclosing(rest):  # type: ignore[type-var]
                async for chunk in rest:
                    yield chunk
        except BaseException as error:
            _verdict(breaker, clock, error)
            raise
        _verdict(breaker, clock, None)


def _verdict(breaker: Breaker, clock: Clock, error: BaseException | None) -> None:
    """What an outcome tells the target's breaker: the one place it is decided. A failure of
    the target (unreachable, 5xx, 429, a broken stream) counts against it; the request's own
    fault (4xx) or a client that left says nothing about it."""
    if error is None:
        breaker.record_success(clock.now())
    elif isinstance(error, UpstreamError) and (error.retryable or error.status >= 500):
        breaker.record_failure(clock.now(), error.summary)
    else:
        breaker.release()
