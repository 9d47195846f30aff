"""uvicorn's HTTP protocol with a deadline for each request's head (request line and headers).

uvicorn times out an idle keep-alive connection, but not a new connection that sends nothing, nor
one that trickles its headers a line at a time: each would hold a connection slot for ever, and
`max_connections` of them would turn every other client away. Here a connection must deliver a
request's whole head within `header_timeout_s` of opening, and the next one within as long of
the previous answer's end, else it is closed: bytes that never make a head (the unread rest of a
body, a trickle) keep nothing open. The body has its own limit (proxy/bodies.py).
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


def with_head_deadline(header_timeout_s: float) -> type[HeadDeadline]:
    """The protocol class for a server whose requests' heads must arrive within this time
    (uvicorn takes a class, and builds one protocol per connection)."""
    return type("HeadDeadline", (HeadDeadline,), {"header_timeout_s": header_timeout_s})


class HeadDeadline(HttpToolsProtocol):
    header_timeout_s = 10.0
    head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self.head_timer is None:
            self._arm()

    def on_response_complete(self) -> None:
        idle = not self.pipeline  # else the next request, already read, starts now
        super().on_response_complete()
        if idle and not self.transport.is_closing():
            self._disarm()
            self._arm()  # uvicorn's keep-alive timer stops at any byte; this one at a head

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self.head_timer = self.loop.call_later(self.header_timeout_s, self._head_too_slow)

    def _disarm(self) -> None:
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None

    def _head_too_slow(self) -> None:
        self.head_timer = None
        if not self.transport.is_closing():
            self.transport.close()
