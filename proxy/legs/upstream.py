"""One aiohttp session to the local engines: requests, streamed relays, and error mapping.

aiohttp, not httpx, on the hot path: measured here at 0.22-0.33 ms of CPU per forwarded request
against 1.2-2.1 ms (see docs/design.md). Timeouts are explicit and separate: connect, first byte
(streams: the first chunk of the body), idle (streams: the longest silence between chunks) and
total. Every aiohttp error is mapped to proxy.errors at this boundary.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Protocol

import aiohttp

from policies.model import Timeouts
from proxy.errors import (
    UpstreamDropped,
    UpstreamError,
    UpstreamNotConnected,
    UpstreamStatus,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from proxy.legs.answer import Answer
from proxy.legs.deadlines import Deadlines

# How long an idle connection to an engine is kept: below the engines' own (uvicorn's, under
# vLLM and the simulator, closes one after 5 s), so a request never goes out on a connection the
# engine is closing: reused about 5 s after its last request, 70% of such sends failed here.
KEEPALIVE_S = 4.0
# Response headers worth passing to the client; hop-by-hop and framing headers are ours to set.
_FORWARDED_HEADERS = ("content-type", "retry-after")


class EngineClient(Protocol):
    """What the request path and the probes ask of the engines' HTTP client: Upstream here, a
    scripted fake in the pipeline's unit tests."""

    timeouts: Timeouts

    async def open(
        self, backend: str, url: str, body: bytes, headers: Mapping[str, str], stream: bool
    ) -> Answer: ...

    async def get(self, url: str, limit_s: float) -> tuple[int, bytes]: ...

    async def close(self) -> None: ...


class Upstream:
    def __init__(self, timeouts: Timeouts) -> None:
        self.timeouts = timeouts
        self.deadlines = Deadlines()  # first byte, idle and total: one watchdog for them all
        connector = aiohttp.TCPConnector(
            limit=0, keepalive_timeout=KEEPALIVE_S, enable_cleanup_closed=True
        )
        self.session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=None, connect=timeouts.connect_s),
            auto_decompress=False,
            skip_auto_headers=("User-Agent",),
        )

    async def close(self) -> None:
        await self.session.close()

    async def open(
        self, backend: str, url: str, body: bytes, headers: Mapping[str, str], stream: bool
    ) -> UpstreamResponse:
        """Send the request and wait for the response headers, and for a whole answer its body
        too, under the one limit (first_byte_s or total_s: a timer each cost more than parsing
        a small answer: proxy/legs/deadlines.py); errors become UpstreamError."""
        wait = self.timeouts.first_byte_s if stream else self.timeouts.total_s
        late = f"no response within {wait:g}s"
        try:
            with self.deadlines.within(wait):
                response = await self._posted(backend, url, body, headers)
                upstream = UpstreamResponse(
                    backend, response, self.timeouts, stream, self.deadlines
                )
                if response.status >= 400:
                    await upstream.fail_with_status()
                if not stream:
                    late = "answer not complete in time"
                    upstream.body = await upstream.whole()
        except TimeoutError as exc:
            raise UpstreamTimeout(f"{backend}: {late}") from exc
        return upstream

    async def _posted(
        self, backend: str, url: str, body: bytes, headers: Mapping[str, str]
    ) -> aiohttp.ClientResponse:
        try:
            return await self.session.post(url, data=body, headers=headers)
        except aiohttp.ConnectionTimeoutError as exc:  # a TimeoutError too: caught first
            connect = self.timeouts.connect_s
            raise UpstreamNotConnected(f"{backend}: no connection within {connect:g}s") from exc
        except aiohttp.ClientConnectorError as exc:
            raise UpstreamNotConnected(f"{backend}: cannot connect ({exc.os_error})") from exc
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
            # Nothing of the answer arrived, so trying elsewhere is safe.
            raise UpstreamUnavailable(f"{backend}: connection lost before answering") from exc
        except aiohttp.ClientError as exc:
            raise UpstreamError(f"{backend}: {type(exc).__name__}: {exc}") from exc

    async def get(self, url: str, limit_s: float) -> tuple[int, bytes]:
        """A small GET for probes: (status, body); raises UpstreamError."""
        try:
            async with asyncio.timeout(limit_s), self.session.get(url) as response:
                return response.status, await response.read()
        except TimeoutError as exc:
            raise UpstreamTimeout(f"{url}: no answer within {limit_s:g}s") from exc
        except aiohttp.ClientConnectorError as exc:
            raise UpstreamUnavailable(f"cannot connect ({exc.os_error})") from exc
        except aiohttp.ClientError as exc:
            raise UpstreamUnavailable(f"{type(exc).__name__}: {exc}") from exc


@dataclass
class UpstreamResponse:
    backend: str
    response: aiohttp.ClientResponse
    timeouts: Timeouts
    stream: bool
    deadlines: Deadlines
    body: bytes | None = None  # a whole answer's, once read

    @property
    def status(self) -> int:
        return self.response.status

    def headers(self) -> list[tuple[bytes, bytes]]:
        return [
            (name.encode(), self.response.headers[name].encode("latin-1"))
            for name in _FORWARDED_HEADERS
            if name in self.response.headers
        ]

    async def read(self) -> bytes:
        """The whole body (read already if the answer was opened as a whole one)."""
        if self.body is not None:
            return self.body
        try:
            with self.deadlines.within(self.timeouts.total_s):
                return await self.whole()
        except TimeoutError as exc:
            raise UpstreamTimeout(f"{self.backend}: answer not complete in time") from exc

    async def whole(self) -> bytes:
        """The whole body, with no limit of its own."""
        try:
            return await self.response.read()
        except aiohttp.ClientError as exc:
            raise UpstreamDropped(f"{self.backend}: connection lost mid-answer") from exc
        finally:
            self.close()

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives; the first chunk may take first_byte_s, later ones idle_s."""
        wait, silence = self.timeouts.first_byte_s, "no first chunk within"
        content = self.response.content
        limit = self.deadlines.limit()
        try:
            while True:
                try:
                    with limit.within(wait):
                        chunk = await content.readany()
                except TimeoutError as exc:
                    raise UpstreamTimeout(f"{self.backend}: {silence} {wait:g}s") from exc
                if not chunk:  # end of body
                    return
                wait, silence = self.timeouts.idle_s, "stream silent for"
                yield chunk
        except aiohttp.ClientError as exc:
            raise UpstreamDropped(f"{self.backend}: connection lost mid-stream") from exc
        finally:
            self.close()

    def close(self) -> None:
        """Drop the connection, so an engine still generating sees the client leave and aborts."""
        if not self.response.closed:
            self.response.close()

    async def fail_with_status(self) -> None:
        try:
            body: bytes | None = await self.read()
        except UpstreamError:
            body = None
        retry_after = self.response.headers.get("retry-after")
        headers = {"Retry-After": retry_after} if retry_after else {}
        raise UpstreamStatus(self.backend, self.status, body, headers)
