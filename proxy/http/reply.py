"""Sending the answer to the client: relay an engine's response, or an OpenAI-shaped error.

A stream is relayed chunk by chunk as the engine produces it, never buffered. An error after the
stream has started cannot change the status any more, so it ends the stream with an SSE error
event (`data: {"error": {...}}`), which the OpenAI SDKs raise as an APIError.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from starlette.types import Send

from proxy.errors import APIError
from proxy.flow.caching import Head
from proxy.flow.record import Record
from proxy.flow.whole import joined
from proxy.http.disconnect import DisconnectWatch

_CONTENT_TYPE = {
    True: (b"content-type", b"text/event-stream"),
    False: (b"content-type", b"application/json"),
}


def header_text(text: str) -> bytes:
    """A header value from text that may hold a client's bytes (a field path names the body's
    keys): printable ASCII only, at most 500 bytes."""
    text = text[:500]
    if text.isascii() and text.isprintable():  # most values: nothing to replace
        return text.encode()
    return "".join(c if " " <= c <= "~" else "?" for c in text).encode()


@dataclass
class Reply:
    send: Send
    watch: DisconnectWatch
    record: Record  # what happened to the request: the access log and the metrics read it
    started: bool = False

    def _decision_headers(self, route: str) -> list[tuple[bytes, bytes]]:
        headers = [(b"x-overspill-route", route.encode())]
        if self.record.cache_status:
            headers.append((b"x-overspill-cache", self.record.cache_status.encode()))
        if self.record.reasons:
            headers.append((b"x-overspill-reason", header_text(self.record.reasons[0])))
        if self.record.privacy:
            headers.append((b"x-overspill-privacy", self.record.privacy.encode()))
        if self.record.privacy_because:
            because = header_text("; ".join(self.record.privacy_because))
            headers.append((b"x-overspill-privacy-because", because))
        if self.record.priority:
            headers.append((b"x-overspill-priority", self.record.priority.encode()))
        return headers

    async def deliver(self, head: Head, chunks: AsyncIterator[bytes]) -> None:
        """Send an answer: a stream chunk by chunk as it comes, a whole body at once. Its
        Content-Type is the proxy's, never an upstream's label: every answer is an event stream
        or a JSON object (proxy/legs/upstream.py checks a whole one)."""
        self.record.route = head.route
        headers = [h for h in head.headers if h[0] != b"content-type"]
        headers += [_CONTENT_TYPE[head.stream], *self._decision_headers(head.route)]
        if head.stream:
            await self._start(head.status, headers)
            # closed here even when the client leaves mid-send, so the upstream stops at once
            async with contextlib.aclosing(chunks):  # type: ignore[type-var]
                async for chunk in chunks:
                    await self._body(chunk)
            self.watch.finish()
            await self.send({"type": "http.response.body", "body": b""})
            return
        body = await joined(chunks)
        headers.append((b"content-length", str(len(body)).encode()))
        await self._start(head.status, headers)
        self.watch.finish()
        await self.send({"type": "http.response.body", "body": body})

    async def _body(self, chunk: bytes) -> None:
        if chunk:
            await self.send({"type": "http.response.body", "body": chunk, "more_body": True})

    async def fail(self, error: APIError) -> None:
        self.record.error = error.code or error.type
        body = error.render()
        self.watch.finish()
        if self.started:
            await self.send({"type": "http.response.body", "body": b"data: " + body + b"\n\n"})
            await self.send({"type": "http.response.body", "body": b""})
            return
        headers = [
            *self._decision_headers(self.record.route or "none"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            *((k.lower().encode(), v.encode()) for k, v in error.headers.items()),
        ]
        await self._start(error.status, headers)
        await self.send({"type": "http.response.body", "body": body})

    async def _start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        self.started = True
        await self.send({"type": "http.response.start", "status": status, "headers": headers})
