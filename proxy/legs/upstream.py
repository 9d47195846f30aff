"""One aiohttp session to the local engines: requests, streamed relays, and error mapping.

aiohttp, not httpx, on the hot path: measured here at 0.22-0.33 ms of CPU per forwarded request
against 1.2-2.1 ms (see docs/design.md). Timeouts are explicit and separate: connect, first byte
(streams: the first chunk of the body), idle (streams: the longest silence between chunks) and
total. Every aiohttp error is mapped to proxy.errors at this boundary.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Protocol

import aiohttp
import orjson

from policies.model import Timeouts
from proxy.errors import (
    UpstreamDropped,
    UpstreamError,
    UpstreamNotConnected,
    UpstreamStatus,
    UpstreamTimeout,
    UpstreamUnavailable,
    UpstreamUnreadable,
)
from proxy.legs.answer import Answer
from proxy.legs.deadlines import Deadlines
from proxy.upstream_said import loggable

# How long an idle connection to an engine is kept: below the engines' own (uvicorn's, under
# vLLM and the simulator, closes one after 5 s), so a request never goes out on a connection the
# engine is closing: reused about 5 s after its last request, 70% of such sends failed here.
KEEPALIVE_S = 4.0
# Every upstream is asked for its bytes as they are: a body is relayed as it came (an engine's,
# a cloud's raw wire), and aiohttp would otherwise offer gzip and deflate, then (with
# auto_decompress off: no inflating on the hot path) hand over compressed bytes unlabelled.
_IDENTITY = {"Accept-Encoding": "identity"}
log = logging.getLogger("overspill.upstream")


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
            headers=_IDENTITY,
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
                    await upstream.fail_with_status(body)
                upstream.check_encoding()
                if stream:
                    upstream.check_event_stream()
                if not stream:
                    late = "answer not complete in time"
                    upstream.body = upstream.checked(await upstream.whole())
        except TimeoutError as exc:
            raise UpstreamTimeout(f"{backend}: {late}") from exc
        except UpstreamError as error:
            logged(error, headers.get("x-request-id", ""), _bearer(headers))
            raise
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
            detail = str(exc.os_error)
            raise UpstreamNotConnected(f"{backend}: cannot connect", detail=detail) from exc
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
            # Nothing of the answer arrived, so trying elsewhere is safe.
            raise UpstreamUnavailable(f"{backend}: connection lost before answering") from exc
        except aiohttp.ClientError as exc:
            raise UpstreamError(f"{backend}: {type(exc).__name__}", detail=str(exc)) from exc

    async def get(self, url: str, limit_s: float) -> tuple[int, bytes]:
        """A small GET for probes: (status, body); raises UpstreamError."""
        try:
            async with asyncio.timeout(limit_s), self.session.get(url) as response:
                return response.status, await response.read()
        except TimeoutError as exc:
            raise UpstreamTimeout(f"no answer within {limit_s:g}s", detail=url) from exc
        except aiohttp.ClientConnectorError as exc:
            raise UpstreamUnavailable("cannot connect", detail=str(exc.os_error)) from exc
        except aiohttp.ClientError as exc:
            raise UpstreamUnavailable(type(exc).__name__, detail=str(exc)) from exc


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
        """None of the upstream's: the proxy labels what it relays (proxy/http/reply.py), as
        it checked it to be, whatever the upstream called it (text/html would be served from
        the dashboard's origin)."""
        return []

    def check_encoding(self) -> None:
        """Identity was asked for: a body in another coding cannot be relayed as it is. Every
        Content-Encoding header counts (a second one is a coding applied after the first), each
        a list of codings; only `identity` (or nothing) passes."""
        values = self.response.headers.getall("content-encoding", [])
        codings = [c.strip().lower() for value in values for c in value.split(",")]
        if any(coding not in ("", "identity") for coding in codings):
            self.close()
            raise UpstreamUnreadable(
                f"{self.backend}: answered in an encoding other than the identity asked for",
                detail=f"content-encoding: {', '.join(values)}",
            )

    def check_event_stream(self) -> None:
        """A streamed answer is relayed as `text/event-stream`: the upstream must have said so
        (the first bytes are checked too: chunks())."""
        values = self.response.headers.getall("content-type", [])
        kinds = {value.partition(";")[0].strip().lower() for value in values}
        if kinds != {"text/event-stream"}:
            self.close()
            raise UpstreamUnreadable(
                f"{self.backend}: streamed an answer that is not an event stream",
                detail=f"content-type: {', '.join(values)}",
            )

    def checked(self, body: bytes) -> bytes:
        """A whole answer's body, if it is a JSON object (every endpoint's answer is one)."""
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            parsed = None
        if not isinstance(parsed, dict):
            start = body[:200].decode(errors="replace")
            message = f"{self.backend}: answered with a body that is not a JSON object"
            raise UpstreamUnreadable(message, detail=start)
        return body

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
        """The body as it arrives; the first chunk may take first_byte_s, later ones idle_s.
        The first bytes are held until they show an event stream (an SSE field or comment);
        anything else is unreadable before a byte is relayed (the first chunk is awaited before
        the reply's head goes out: proxy/flow/attempts.py)."""
        wait, silence = self.timeouts.first_byte_s, "no first chunk within"
        content = self.response.content
        limit = self.deadlines.limit()
        head: bytes | None = b""  # the first bytes, until they tell; None once they did
        try:
            while True:
                try:
                    with limit.within(wait):
                        chunk = await content.readany()
                except TimeoutError as exc:
                    raise UpstreamTimeout(f"{self.backend}: {silence} {wait:g}s") from exc
                if not chunk:  # end of body
                    if head:
                        raise self._not_events(head)
                    return
                if head is not None:
                    head += chunk
                    starts = sse_start(head)
                    if starts is None:
                        continue
                    if not starts:
                        raise self._not_events(head)
                    chunk, head = head, None
                wait, silence = self.timeouts.idle_s, "stream silent for"
                yield chunk
        except aiohttp.ClientError as exc:
            raise UpstreamDropped(f"{self.backend}: connection lost mid-stream") from exc
        finally:
            self.close()

    def _not_events(self, head: bytes) -> UpstreamUnreadable:
        message = f"{self.backend}: streamed an answer that is not an event stream"
        return UpstreamUnreadable(message, detail=head[:200].decode(errors="replace"))

    def close(self) -> None:
        """Drop the connection, so an engine still generating sees the client leave and aborts."""
        if not self.response.closed:
            self.response.close()

    async def fail_with_status(self, sent: bytes) -> None:
        """The error status as the proxy's error: UpstreamStatus keeps of the answer (and of
        its Retry-After) what a client may see; a `param` only if it names a field of `sent`."""
        try:
            body: bytes | None = await self.read()
        except UpstreamError:
            body = None
        retry_after = self.response.headers.get("retry-after")
        headers = {"Retry-After": retry_after} if retry_after else {}
        raise UpstreamStatus(self.backend, self.status, body, headers, sent)


# How an event stream may begin (after a byte-order mark and blank lines): a field or a comment
_SSE_FIELDS = (b"data:", b"event:", b"id:", b"retry:", b":")
_BOM = b"\xef\xbb\xbf"
_HEAD_MOST = 4096  # blank lines an upstream may send before its first event


def sse_start(head: bytes) -> bool | None:
    """Whether the first bytes of a body begin an event stream; None: too few to tell."""
    if len(head) < len(_BOM) and _BOM.startswith(head):
        return None
    rest = head.removeprefix(_BOM).lstrip(b"\r\n")
    if rest.startswith(_SSE_FIELDS):
        return True
    if len(head) > _HEAD_MOST:
        return False
    if not rest or any(field.startswith(rest) for field in _SSE_FIELDS):
        return None
    return False


def logged(error: UpstreamError, request_id: str, secret: str = "") -> None:
    """What the upstream said, for the operator: the client got the proxy's own message. The
    key the call carried is masked, should the upstream echo it."""
    if not error.detail:
        return
    detail = error.detail
    if len(secret) >= 8:
        detail = detail.replace(secret, "…" + secret[-4:])
    detail = loggable(detail)  # cut short once masked: no key is cut in two
    # a caller's 4xx is routine (a bad parameter); a target's failure is the operator's to see
    level = logging.WARNING if error.status >= 500 else logging.INFO
    log.log(level, "%s (request %s): %s", error.message, request_id or "-", detail)


def _bearer(headers: Mapping[str, str]) -> str:
    return headers.get("authorization", "").removeprefix("Bearer ")
