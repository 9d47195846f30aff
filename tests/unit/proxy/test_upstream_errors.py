"""proxy/legs/upstream.py's boundary: how aiohttp's failures to open a request become our errors
(aiohttp's session.post replaced; no sockets). What matters is whether anything was sent: if
not, the request may go to another target at once."""

from __future__ import annotations

import aiohttp
import pytest

from policies.model import Timeouts
from proxy.errors import UpstreamError, UpstreamNotConnected, UpstreamTimeout, UpstreamUnavailable
from proxy.legs.upstream import Upstream


async def opened_with(failure: BaseException) -> UpstreamError:
    upstream = Upstream(Timeouts(connect_s=2.0, first_byte_s=30.0))

    async def post(*args: object, **kwargs: object) -> None:
        raise failure

    upstream.session.post = post  # type: ignore[method-assign,assignment]
    try:
        with pytest.raises(UpstreamError) as caught:
            await upstream.open("engine", "http://engine.invalid/v1/chat", b"{}", {}, True)
        return caught.value
    finally:
        await upstream.close()


async def test_a_connect_timeout_is_not_connected_not_a_first_byte_timeout() -> None:
    error = await opened_with(aiohttp.ConnectionTimeoutError("connect timed out"))
    assert isinstance(error, UpstreamNotConnected)
    assert error.retryable
    assert "no connection within 2s" in error.message


async def test_a_read_timeout_is_a_timeout_and_not_retried() -> None:
    error = await opened_with(TimeoutError())
    assert isinstance(error, UpstreamTimeout)
    assert not error.retryable


async def test_a_connection_lost_before_answering_may_be_retried_but_was_connected() -> None:
    error = await opened_with(aiohttp.ServerDisconnectedError())
    assert isinstance(error, UpstreamUnavailable)
    assert not isinstance(error, UpstreamNotConnected)
    assert error.retryable
