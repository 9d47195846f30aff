"""proxy/attempts.py with fake legs: what a failure leaves in the target's breaker."""

from __future__ import annotations

import time

import orjson
import pytest

from policies.model import BreakerSettings, RetrySettings
from proxy.answer import Answer
from proxy.attempts import attempt
from proxy.breaker import Breaker
from proxy.errors import UpstreamError, UpstreamStatus, UpstreamUnavailable

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
    assert SECRET in error.message  # the failing request's own error does say it
    breaker = Breaker(BreakerSettings(consecutive_failures=1))

    async def failing() -> Answer:
        raise error

    with pytest.raises(UpstreamError):
        await attempt(failing, breaker, RetrySettings(attempts=1), time.monotonic() + 10)
    assert breaker.state == "open"
    assert breaker.last_failure
    assert SECRET not in breaker.last_failure
