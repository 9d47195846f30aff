"""Sending the answer to the client: relay an engine's response, or an OpenAI-shaped error.

A stream is relayed chunk by chunk as the engine produces it, never buffered. An error after the
stream has started cannot change the status any more, so it ends the stream with an SSE error
event (`data: {"error": {...}}`), which the OpenAI SDKs raise as an APIError.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from starlette.types import Send

from proxy.disconnect import DisconnectWatch
from proxy.errors import APIError
from proxy.upstream import UpstreamResponse


@dataclass
class Reply:
    send: Send
    watch: DisconnectWatch
    state: dict[str, object]  # the request's scope state, which the access log reads
    started: bool = False
    reasons: tuple[str, ...] = field(default_factory=tuple)

    async def relay(self, upstream: UpstreamResponse, route: str) -> None:
        self.state["route"] = route
        headers = [*upstream.headers(), (b"x-overspill-route", route.encode())]
        if upstream.stream:
            await self._start(upstream.status, headers)
            async for chunk in upstream.chunks():
                await self.send({"type": "http.response.body", "body": chunk, "more_body": True})
            self.watch.finish()
            await self.send({"type": "http.response.body", "body": b""})
        else:
            body = await upstream.read()
            headers.append((b"content-length", str(len(body)).encode()))
            await self._start(upstream.status, headers)
            self.watch.finish()
            await self.send({"type": "http.response.body", "body": body})

    async def fail(self, error: APIError) -> None:
        self.state["error"] = error.code or error.type
        body = error.render()
        self.watch.finish()
        if self.started:
            await self.send({"type": "http.response.body", "body": b"data: " + body + b"\n\n"})
            await self.send({"type": "http.response.body", "body": b""})
            return
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            *((k.lower().encode(), v.encode()) for k, v in error.headers.items()),
        ]
        await self._start(error.status, headers)
        await self.send({"type": "http.response.body", "body": body})

    async def _start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        self.started = True
        await self.send({"type": "http.response.start", "status": status, "headers": headers})
