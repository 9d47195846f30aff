"""proxy/legs/upstream.py's boundary: how aiohttp's failures to open a request become our errors
(aiohttp's session.post replaced; no sockets). What matters is whether anything was sent: if
not, the request may go to another target at once."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from policies.model import Timeouts
from proxy.errors import UpstreamError, UpstreamNotConnected, UpstreamTimeout, UpstreamUnavailable
from proxy.legs.deadlines import Deadlines
from proxy.legs.upstream import Upstream, UpstreamResponse


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


class Content:
    """An engine's body as aiohttp hands it over: `chunks` in turn, then silence for ever."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def readany(self) -> bytes:
        if self.chunks:
            return self.chunks.pop(0)
        await asyncio.Event().wait()  # the engine says nothing more
        raise AssertionError("unreachable")


class Response:
    def __init__(self, chunks: list[bytes]) -> None:
        self.content = Content(chunks)
        self.closed = False

    def close(self) -> None:
        self.closed = True


async def streamed(chunks: list[bytes], timeouts: Timeouts) -> tuple[list[bytes], UpstreamError]:
    """What a stream relayed before it failed, and how it failed."""
    response = Response(chunks)
    deadlines = Deadlines(tick_s=0.001)
    answer = UpstreamResponse("engine", response, timeouts, True, deadlines)  # type: ignore[arg-type]
    got: list[bytes] = []

    async def relay() -> None:
        async for chunk in answer.chunks():
            got.append(chunk)

    with pytest.raises(UpstreamError) as caught:
        await relay()
    assert response.closed  # the engine sees the proxy leave and stops
    return got, caught.value


async def test_a_stream_with_no_first_chunk_is_a_first_byte_timeout() -> None:
    got, error = await streamed([], Timeouts(first_byte_s=0.01, idle_s=300.0))
    assert got == []
    assert isinstance(error, UpstreamTimeout)
    assert error.message == "engine: no first chunk within 0.01s"


async def test_a_stream_that_stops_midway_is_an_idle_timeout() -> None:
    got, error = await streamed([b"data: 1\n\n"], Timeouts(first_byte_s=300.0, idle_s=0.01))
    assert got == [b"data: 1\n\n"]
    assert isinstance(error, UpstreamTimeout)
    assert error.message == "engine: stream silent for 0.01s"
