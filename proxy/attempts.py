"""Trying one target: its breaker, retries with backoff before the first byte, the outcome.

tenacity runs the loop: exponential backoff with jitter, only for retryable errors (connection
failures, 5xx, 429 whose Retry-After is honoured), within the request's deadline. For a stream,
an attempt succeeds only once the first chunk has arrived: until then nothing reached the client,
so a retry, or the next target, is still invisible to it.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
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
from proxy.answer import Answer
from proxy.breaker import Breaker
from proxy.errors import APIError, UpstreamError


@dataclass
class Opened:
    """A target's answer, with the first chunk of a stream already in hand."""

    answer: Answer
    first: bytes
    rest: AsyncIterator[bytes] | None


class TargetRefused(Exception):
    """The target's breaker is open: move on to the next one without calling it."""


class _PastDeadline(stop_base):
    """Stop when the next back-off would end after the request's deadline."""

    def __init__(self, settings: RetrySettings, deadline: float) -> None:
        self.wait = _wait(settings)
        self.deadline = deadline

    def __call__(self, retry_state: RetryCallState) -> bool:
        return time.monotonic() + self.wait(retry_state) >= self.deadline


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
) -> Opened:
    """Open the target (retrying as allowed) and, for a stream, receive its first chunk."""

    retrying = AsyncRetrying(
        stop=stop_any(stop_after_attempt(settings.attempts), _PastDeadline(settings, deadline)),
        wait=_wait(settings),
        retry=retry_if_exception(retryable),
        reraise=True,
    )
    async for try_ in retrying:
        with try_:
            return await _once(open_answer, breaker)
    raise AssertionError("unreachable: tenacity either returns or raises")  # pragma: no cover


async def _once(open_answer: Callable[[], Awaitable[Answer]], breaker: Breaker) -> Opened:
    if not breaker.allow(time.monotonic()):
        raise TargetRefused(breaker.last_failure or "breaker open")
    try:
        answer = await open_answer()
        if not answer.stream:
            return Opened(answer, b"", None)
        chunks = answer.chunks()
        first = await anext(chunks, b"")
    except UpstreamError as error:
        if error.retryable or error.status >= 500:
            breaker.record_failure(time.monotonic(), error.summary)
        else:
            breaker.release()
        raise
    except BaseException:
        breaker.release()
        raise
    return Opened(answer, first, chunks)
