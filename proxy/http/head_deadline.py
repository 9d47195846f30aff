"""uvicorn's HTTP protocol with a deadline for each request's head (request line and headers).

uvicorn times out an idle keep-alive connection, but not a new connection that sends nothing, nor
one that trickles its headers a line at a time: each would hold a connection slot for ever, and
`max_connections` of them would turn every other client away. Here a connection must deliver a
request's whole head within `header_timeout_s` of opening, and the next one within as long of
the previous answer's end, else it is closed: bytes that never make a head (a trickle) keep
nothing open. The body has its own limit (proxy/http/bodies.py).

An answer can go out before its request's body has all arrived (a 413 from Content-Length
alone). Closing then, with the client still uploading, resets the connection, and the client
sees "connection reset by peer" instead of the 413 waiting in its socket. So the connection
lingers, as nginx's lingering close does: the rest of the body is read and discarded until it
ends or until the body's own deadline (`body_timeout_s` after its head), then the connection is
closed, or kept alive if the body ended.

One timer per connection, not per request: a request only moves the due time; the timer, when
it fires, closes the connection if a head is still owed past it, or sleeps until the new due
time. (Arming and cancelling a timer for every request cost as much as half of what the proxy
adds to a forwarded answer's parsing.)
"""

from __future__ import annotations

import asyncio

from proxy.http.connection import Facts


def with_head_deadline(header_timeout_s: float, body_timeout_s: float) -> type[HeadDeadline]:
    """The protocol class for a server whose requests' heads must arrive within
    `header_timeout_s`, and their bodies within `body_timeout_s` of their heads even when
    answered early (uvicorn takes a class, and builds one protocol per connection)."""
    limits = {"header_timeout_s": header_timeout_s, "body_timeout_s": body_timeout_s}
    return type("HeadDeadline", (HeadDeadline,), limits)


class HeadDeadline(Facts):
    header_timeout_s = 10.0
    body_timeout_s = 30.0
    head_due: float | None = None  # loop time by which a head must have arrived; None: not owed
    head_timer: asyncio.TimerHandle | None = None
    body_due = 0.0  # loop time by which the current request's body must have arrived
    linger_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_head()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self.head_due is None:
            self._await_head()

    def on_response_complete(self) -> None:
        idle = not self.pipeline  # else the next request, already read, starts now
        super().on_response_complete()
        if self.transport.is_closing():
            return
        if not self.body_done:
            self._linger()
        elif idle:
            self._await_head()  # uvicorn's keep-alive timer stops at any byte; this one at a head

    def on_headers_complete(self) -> None:
        self.head_due = None
        self.body_due = self.loop.time() + self.body_timeout_s
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        if self.linger_timer is not None:  # drained: the connection may carry another request
            self.linger_timer.cancel()
            self.linger_timer = None
            self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self.head_due = None
        if self.head_timer is not None:
            self.head_timer.cancel()
        if self.linger_timer is not None:
            self.linger_timer.cancel()
        super().connection_lost(exc)

    def _linger(self) -> None:
        """Answered before the body arrived: read and drop the rest until the body's deadline
        (uvicorn discards body bytes after the answer), then close."""
        self.head_due = None
        remaining = self.body_due - self.loop.time()
        if remaining <= 0:  # a body already late (its 408 is out): no more time for it
            self.transport.close()
            return
        self.linger_timer = self.loop.call_later(remaining, self._close)

    def _await_head(self) -> None:
        """A head is owed within header_timeout_s from now."""
        self.head_due = self.loop.time() + self.header_timeout_s
        if self.head_timer is None:
            self.head_timer = self.loop.call_at(self.head_due, self._check_head)

    def _check_head(self) -> None:
        self.head_timer = None
        if self.head_due is None:  # the head came: the next one arms the timer again
            return
        if self.loop.time() >= self.head_due:
            self._close()
        else:  # the due time moved on since this timer was set
            self.head_timer = self.loop.call_at(self.head_due, self._check_head)

    def _close(self) -> None:
        self.linger_timer = None
        if not self.transport.is_closing():
            self.transport.close()
