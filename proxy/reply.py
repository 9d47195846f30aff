"""Sending the answer to the client: relay an engine's response, or an OpenAI-shaped error.

A stream is relayed chunk by chunk as the engine produces it, never buffered. An error after the
stream has started cannot change the status any more, so it ends the stream with an SSE error
event (`data: {"error": {...}}`), which the OpenAI SDKs raise as an APIError.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from starlette.types import Send

from proxy.attempts import Opened
from proxy.disconnect import DisconnectWatch
from proxy.errors import APIError


@dataclass
class Reply:
    send: Send
    watch: DisconnectWatch
    state: dict[str, object]  # the request's scope state, which the access log reads
    started: bool = False
    reasons: tuple[str, ...] = field(default_factory=tuple)
    privacy: str = ""

    def note(self, reasons: tuple[str, ...], privacy: str) -> None:
        """Why the request goes where it goes: for the headers and the access log."""
        self.reasons, self.privacy = reasons, privacy
        self.state["reasons"] = list(reasons)
        self.state["privacy"] = privacy

    def _decision_headers(self, route: str) -> list[tuple[bytes, bytes]]:
        headers = [(b"x-overspill-route", route.encode())]
        if self.reasons:
            reason = self.reasons[0].encode("ascii", "replace")[:500]
            headers.append((b"x-overspill-reason", reason))
        if self.privacy:
            headers.append((b"x-overspill-privacy", self.privacy.encode()))
        return headers

    async def relay(self, opened: Opened, route: str) -> None:
        self.state["route"] = route
        answer = opened.answer
        headers = [*answer.headers(), *self._decision_headers(route)]
        if opened.rest is not None:
            await self._start(answer.status, headers)
            await self._body(opened.first)
            async for chunk in opened.rest:
                await self._body(chunk)
            self.watch.finish()
            await self.send({"type": "http.response.body", "body": b""})
        else:
            body = await answer.read()
            headers.append((b"content-length", str(len(body)).encode()))
            await self._start(answer.status, headers)
            self.watch.finish()
            await self.send({"type": "http.response.body", "body": body})

    async def _body(self, chunk: bytes) -> None:
        if chunk:
            await self.send({"type": "http.response.body", "body": chunk, "more_body": True})

    async def fail(self, error: APIError) -> None:
        self.state["error"] = error.code or error.type
        body = error.render()
        self.watch.finish()
        if self.started:
            await self.send({"type": "http.response.body", "body": b"data: " + body + b"\n\n"})
            await self.send({"type": "http.response.body", "body": b""})
            return
        headers = [
            *self._decision_headers(str(self.state.get("route") or "none")),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            *((k.lower().encode(), v.encode()) for k, v in error.headers.items()),
        ]
        await self._start(error.status, headers)
        await self.send({"type": "http.response.body", "body": body})

    async def _start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        self.started = True
        await self.send({"type": "http.response.start", "status": status, "headers": headers})
