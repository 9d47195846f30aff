"""uvicorn's HTTP protocol with limits on each request's head (request line and headers): a
deadline, a size and a number of header fields.

uvicorn times out an idle keep-alive connection, but not a new connection that sends nothing, nor
one that trickles its headers a line at a time: each would hold a connection slot for ever, and
`max_connections` of them would turn every other client away. Here a connection must deliver a
request's whole head within `header_timeout_s` of opening, and the next one within as long of
the previous answer's end, else it is closed: bytes that never make a head (a trickle) keep
nothing open. The body has its own limit (proxy/http/bodies.py).

Nor does uvicorn bound a head's size: httptools gathers a header's name and value by
concatenation, so one 64 MB value costs seconds of the event loop and its megabytes, and a head
of a million distinct headers is a million Python objects. So the bytes a head takes are counted
as they are read, before the parser keeps them, and its fields after each read and when it
ends: past `max_head_bytes`, or past `max_headers` fields, the client gets a 431, nothing more
is read, and the fields parsed are let go. A chunked body's trailer fields are
headers too, and count alike (past the limit the connection is closed: their request is being
answered). Bytes read in one go may end one request and begin the next head (pipelining): those
count from the next read on, so what the parser keeps of a head is bounded by the limit plus one
read, and a head within the limit is never refused.

Nor does uvicorn bound how far ahead of its answers a connection is parsed: each pipelined
request parsed is queued, with its scope and cycle (~2.5 KB), and httptools parses all it is
given, so one 256 KB read of 18-byte GETs queued ~14,500 of them, and each answer let one more
read in. As nginx reads the next request only when the previous is done, the parser is fed a
read in pieces, each ending at most at the next head's end (`\r\n\r\n`, which llhttp requires)
and the body after it, so a piece completes about one request; once `max_waiting` requests
wait their turn, the rest is held unparsed and reading stops (past `max_head_bytes` held) until
an answer frees a place. A read of one request is one piece: ordinary traffic pays two searches.

An answer can go out before its request's body has all arrived (a 413 from Content-Length
alone). Closing then, with the client still uploading, resets the connection, and the client
sees "connection reset by peer" instead of the 413 waiting in its socket. So the connection
lingers, as nginx's lingering close does: the rest of the body is read and discarded until it
ends or until the body's own deadline (`body_timeout_s` after its head), then the connection is
closed, or kept alive if the body ended and the client did not ask to close (`Connection:
close`, HTTP/1.0: uvicorn would close at once, under the upload). A refused head lingers alike:
the 431 is sent, the connection half-closed, what the client still sends is dropped until the
head's deadline.

One timer per connection, not per request: a request only moves the due time; the timer, when
it fires, closes the connection if a head is still owed past it, or sleeps until the new due
time. (Arming and cancelling a timer for every request cost as much as half of what the proxy
adds to a forwarded answer's parsing.)
"""

from __future__ import annotations

import asyncio
from typing import cast

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, RequestResponseCycle

from proxy.errors import APIError
from proxy.http.connection import Facts


class HeadTooLarge(APIError):
    status = 431
    type = "invalid_request_error"
    code = "request_header_fields_too_large"


HEAD_END = b"\n\r\n"  # ends every head, chunked body and trailer section (llhttp wants CRLFs)
SMALLEST_PIECE = 64  # bytes: leading empty lines or chunk data full of HEAD_END cost few feeds


class _Stop(Exception):
    """Raised from a parser callback: the parser stops reading the buffer it was given."""


def with_head_limits(
    header_timeout_s: float, body_timeout_s: float, max_head_bytes: int, max_headers: int
) -> type[HeadDeadline]:
    """The protocol class for a server whose requests' heads must arrive within
    `header_timeout_s` and hold at most `max_head_bytes` and `max_headers` fields, and whose
    bodies must arrive within `body_timeout_s` of their heads even when answered early (uvicorn
    takes a class, and builds one protocol per connection)."""
    limits = {
        "header_timeout_s": header_timeout_s,
        "body_timeout_s": body_timeout_s,
        "max_head_bytes": max_head_bytes,
        "max_headers": max_headers,
    }
    return type("HeadDeadline", (HeadDeadline,), limits)


class HeadDeadline(Facts):
    header_timeout_s = 10.0
    body_timeout_s = 30.0
    max_head_bytes = 64 * 1024
    max_headers = 256
    head_due: float | None = None  # loop time by which a head must have arrived; None: not owed
    head_timer: asyncio.TimerHandle | None = None
    body_due = 0.0  # loop time by which the current request's body must have arrived
    linger_timer: asyncio.TimerHandle | None = None
    # Bytes read of the head (or trailer fields) being received; None: a body's bytes are
    # coming, uncounted (the body has its own limits)
    head_bytes: int | None = 0
    refusal: HeadTooLarge | None = None  # a head was refused: nothing more is read
    max_waiting = 8  # pipelined requests parsed ahead of their turn; then reading waits
    held: bytes | None = None  # read but not parsed (held[held_from:]): enough requests wait
    held_from = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_head()

    def data_received(self, data: bytes) -> None:
        if self.refusal is not None:
            return  # dropped, until the head's deadline closes the connection
        if self.held is not None or len(self.pipeline) >= self.max_waiting:
            self._hold(data, 0)  # not counted yet: it is when parsed
        else:
            self._received(data, 0)

    def _received(self, data: bytes, start: int) -> None:
        """Parse `data[start:]`, counting what a head takes of it."""
        if self.head_bytes is None:  # a body's bytes: its own limits apply
            self._parse(data, start, len(data))
            return
        room = self.max_head_bytes - self.head_bytes
        if len(data) - start <= room:
            self.head_bytes += len(data) - start  # the parser resets it if the head ends in here
            self._parse(data, start, len(data))
        else:
            self._past_room(data, start, start + room)
        if self.head_bytes is not None and len(self.headers or ()) > self.max_headers:
            self._refuse(f"the request has more than {self.max_headers} header fields")

    def _past_room(self, data: bytes, start: int, room_end: int) -> None:
        """More arrived than the head may still take: the parser reads what fits first; if the
        head (or trailer section) did not end within it, it is refused before the rest is kept."""
        self.head_bytes = self.max_head_bytes  # a head or body ending in there moves it
        self._parse(data, start, room_end)
        if self.refusal is not None or self.transport.is_closing() or self.held is not None:
            return  # refused, or malformed (uvicorn answered its 400), or the rest is held
        if self.head_bytes == self.max_head_bytes:
            self._refuse(f"the request's head is larger than {self.max_head_bytes} bytes")
        else:
            self._parse(data, room_end, len(data))

    def _parse(self, data: bytes, start: int, stop: int) -> None:
        """Feed `data[start:stop]` to the parser a piece at a time, until `max_waiting`
        requests wait: then all from there on (to the end of `data`) is held."""
        view = None
        while start < stop:
            if len(self.pipeline) >= self.max_waiting:
                self._hold(data, start)
                return
            end = self._piece_end(data, start, stop)
            if end - start == len(data):
                super().data_received(data)
            else:  # httptools reads any buffer: a slice of what was read, not a copy
                view = view or memoryview(data)
                super().data_received(cast(bytes, view[start:end]))
            if self.refusal is not None or self.transport.is_closing():
                return  # refused, or malformed: uvicorn answered its 400
            if self.parser.should_upgrade():
                return  # uvicorn drops what follows an upgrade's head in the read
            start = end

    def _piece_end(self, data: bytes, start: int, stop: int) -> int:
        """Where the next piece ends: before the second HEAD_END from `start`, so that it ends at
        most one head, with the body after it (a few heads more within SMALLEST_PIECE)."""
        first = data.find(HEAD_END, start, stop)
        second = -1 if first < 0 else data.find(HEAD_END, first + len(HEAD_END), stop)
        return stop if second < 0 else min(stop, max(second, start + SMALLEST_PIECE))

    def _hold(self, data: bytes, start: int) -> None:
        """Keep `data[start:]` unparsed until a waiting request's turn comes; past
        `max_head_bytes` held, stop reading."""
        if self.held is None:
            self.held, self.held_from = data, start
        else:
            self.held, self.held_from = self.held[self.held_from :] + data[start:], 0
        if len(self.held) - self.held_from > self.max_head_bytes:
            self.flow.pause_reading()

    def _release(self) -> None:
        """A waiting request started: parse on from what was held."""
        data, start = self.held, self.held_from
        self.held = None
        if data is not None:
            self._received(data, start)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self.head_due is None:
            self._await_head()

    def on_headers_complete(self) -> None:
        self.head_due = None
        self.head_bytes = None
        if self.transport.is_closing():
            return  # a request after one whose connection closed is not started
        if len(self.headers) > self.max_headers:
            self._refuse(f"the request has more than {self.max_headers} header fields")
            raise _Stop
        self.body_due = self.loop.time() + self.body_timeout_s
        previous = self.cycle
        super().on_headers_complete()
        if self.cycle is not previous and not self.cycle.keep_alive:  # (an upgrade makes none)
            self.cycle.transport = _AfterBody(self, self.cycle)

    def on_chunk_header(self) -> None:
        self.head_bytes = 0  # a chunk's data, or after the last chunk, trailer fields

    def on_body(self, body: bytes) -> None:
        self.head_bytes = None
        super().on_body(body)

    def on_message_complete(self) -> None:
        self.head_bytes = 0
        super().on_message_complete()
        if self.linger_timer is not None:  # drained
            self.linger_timer.cancel()
            self.linger_timer = None
            if self.cycle.keep_alive:  # the connection may carry another request
                self._await_head()
            else:
                self.transport.close()

    def on_response_complete(self) -> None:
        idle = not self.pipeline  # else the next request, already read, starts now
        super().on_response_complete()
        if self.transport.is_closing():
            return
        if self.held is not None and self.refusal is None:
            if len(self.pipeline) < self.max_waiting:
                self._release()
            if self.held is not None and len(self.held) - self.held_from > self.max_head_bytes:
                self.flow.pause_reading()  # uvicorn resumed reading: still enough held
        if self.refusal is not None:
            if idle:  # the answers owed before the refused head are out: now its 431
                self._answer(self.refusal)
        elif not self.body_done:
            self._linger()
        elif idle:
            self._await_head()  # uvicorn's keep-alive timer stops at any byte; this one at a head

    def send_400_response(self, msg: str) -> None:
        if self.refusal is None:  # else the parser stopped at our refusal, answered already
            super().send_400_response(msg)

    def connection_lost(self, exc: Exception | None) -> None:
        self.head_due = None
        self.held = None
        if self.head_timer is not None:
            self.head_timer.cancel()
        if self.linger_timer is not None:
            self.linger_timer.cancel()
        super().connection_lost(exc)

    def close_answered(self, cycle: RequestResponseCycle) -> None:
        """The connection of `cycle`, answered, closes (the client asked it to): first the
        rest of its body is read, if it is still coming."""
        if cycle is self.cycle and cycle.response_complete and not self.body_done:
            self._linger()
        else:
            self.transport.close()

    def _refuse(self, why: str) -> None:
        if self.refusal is not None or self.transport.is_closing():
            return  # refused already, or malformed: uvicorn's 400 is out
        self.refusal = HeadTooLarge(why)
        if not self.body_done:  # trailer fields: their request is being answered, no 431
            self.transport.close()
            return
        if self.headers and (self.cycle is None or self.cycle.scope is not self.scope):
            # the refused head's own fields (a read of tiny ones makes thousands of objects):
            # not kept while the connection lingers
            self.headers.clear()
        if self.cycle is None or self.cycle.response_complete:
            self._answer(self.refusal)
        else:  # answers are owed to earlier requests: the 431 follows them, in order
            self.head_due = None

    def _answer(self, refusal: HeadTooLarge) -> None:
        """The 431, then a half-close: what the client still sends is dropped until the head's
        deadline (a client still sending its head would see a reset, not its answer)."""
        body = refusal.render()
        head = [STATUS_LINE[refusal.status]]
        head += [b"%s: %s\r\n" % pair for pair in self.server_state.default_headers]
        head.append(b"content-type: application/json\r\ncontent-length: %d\r\n" % len(body))
        self.transport.write(b"".join([*head, b"connection: close\r\n\r\n", body]))
        self.transport.write_eof()
        if self.head_due is None:
            self._await_head()

    def _linger(self) -> None:
        """Answered before the body arrived: read and drop the rest until the body's deadline
        (uvicorn discards body bytes after the answer), then close."""
        if self.linger_timer is not None:
            return
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


class _AfterBody(asyncio.Transport):
    """What a request's cycle writes to when its connection closes after the answer: closing
    waits for the rest of the body (uvicorn closes at once, under the client's upload)."""

    def __init__(self, protocol: HeadDeadline, cycle: RequestResponseCycle) -> None:
        super().__init__()
        self.protocol, self.cycle = protocol, cycle

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.protocol.transport.write(data)

    def is_closing(self) -> bool:
        return self.protocol.transport.is_closing()

    def close(self) -> None:
        self.protocol.close_answered(self.cycle)
