"""proxy/http/head_deadline.py, byte by byte: a request's head is counted as it is read and
refused with a 431 past `max_head_bytes` or `max_headers`, yet no head within the limits is ever
refused, however the reads cut it (pipelined requests, a body in the same read, a head a byte
at a time); trailer fields count alike; a client that asks to close still gets its early answer
and its body read before the close. The protocol runs on the test's loop over a transport that
keeps what is written: no socket."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from typing import Any

from uvicorn.config import Config
from uvicorn.server import ServerState

from proxy.http.head_deadline import HeadDeadline, with_head_limits

LIMIT = 4096
FIELDS = 16


class Wire(asyncio.Transport):
    """The client's side as the protocol sees it: what it was sent, and whether it was closed
    or half-closed."""

    def __init__(self) -> None:
        super().__init__()
        self.sent = bytearray()
        self.eof = False
        self.shut = asyncio.Event()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 5000), "sockname": ("127.0.0.1", 8080)}.get(name)

    @property
    def closed(self) -> bool:
        return self.shut.is_set()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        assert not self.closed, "written after the close"
        assert not self.eof, "written after the half-close"
        self.sent += data

    def write_eof(self) -> None:
        self.eof = True

    def close(self) -> None:
        self.shut.set()

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def statuses(self) -> list[int]:
        return [int(part[:3]) for part in bytes(self.sent).split(b"HTTP/1.1 ")[1:]]


class App:
    """Reads each request's body, then answers 200 (or 413 at once, without reading, when the
    declared body is over `early_over` bytes); notes what it saw."""

    def __init__(self, early_over: int | None = None) -> None:
        self.early_over = early_over
        self.seen: list[tuple[str, int, int]] = []  # path, header fields, body bytes

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        declared = int(dict(scope["headers"]).get(b"content-length", b"0"))
        if self.early_over is not None and declared > self.early_over:
            await answer(send, 413)
            return
        body, more = b"", True
        while more:
            message = await receive()
            body, more = body + message.get("body", b""), message.get("more_body", False)
        self.seen.append((scope["path"], len(scope["headers"]), len(body)))
        await answer(send, 200)


async def answer(send: Any, status: int) -> None:
    await send(
        {"type": "http.response.start", "status": status, "headers": [(b"content-length", b"2")]}
    )
    await send({"type": "http.response.body", "body": b"ok"})


def connection(app: App, body_timeout_s: float = 30.0) -> tuple[HeadDeadline, Wire]:
    protocol_class = with_head_limits(10.0, body_timeout_s, LIMIT, FIELDS)
    config = Config(app, http=protocol_class, lifespan="off", log_config=None, proxy_headers=False)
    config.load()
    protocol = protocol_class(config, ServerState(), {}, asyncio.get_running_loop())
    wire = Wire()
    protocol.connection_made(wire)
    return protocol, wire


async def settled() -> None:
    """Let the requests' tasks run until they wait for something only the test can give."""
    for _ in range(50):
        await asyncio.sleep(0)


def head(path: str = "/", fields: int = 1, size: int | None = None, extra: bytes = b"") -> bytes:
    """A GET's head with `fields` header fields (host first), padded to `size` bytes in all."""
    lines = [b"GET " + path.encode() + b" HTTP/1.1", b"host: x"]
    lines += [b"x-%d: v" % n for n in range(fields - 1)]
    text = b"\r\n".join(lines) + b"\r\n" + extra
    if size is not None:
        pad = size - len(text) - len(b"x-pad: \r\n\r\n")
        assert pad >= 0
        text += b"x-pad: " + b"p" * pad + b"\r\n"
    return text + b"\r\n"


async def fed(reads: Iterable[bytes], app: App | None = None) -> tuple[App, Wire]:
    app = app or App()
    protocol, wire = connection(app)
    for data in reads:
        protocol.data_received(data)
    await settled()
    return app, wire


def refusal(wire: Wire) -> dict[str, Any]:
    _, body = bytes(wire.sent).split(b"\r\n\r\n", 1)
    error: dict[str, Any] = json.loads(body)["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == "request_header_fields_too_large"
    return error


async def test_a_head_at_the_size_limit_is_served() -> None:
    _, wire = await fed([head(size=LIMIT)])
    assert wire.statuses() == [200]
    assert not wire.closed


async def test_a_byte_over_the_size_limit_is_a_431_and_nothing_more_is_read() -> None:
    app, wire = await fed([head(size=LIMIT + 1)])
    assert wire.statuses() == [431]
    assert wire.eof
    assert str(LIMIT) in refusal(wire)["message"]
    assert app.seen == []


async def test_a_head_in_pieces_is_counted_across_them() -> None:
    whole = head(size=LIMIT + 1)
    _, wire = await fed([whole[i : i + 100] for i in range(0, len(whole), 100)])
    assert wire.statuses() == [431]
    _, wire = await fed([bytes([b]) for b in head(size=LIMIT)])
    assert wire.statuses() == [200]


async def test_a_value_that_never_ends_is_refused_at_the_limit() -> None:
    """httptools joins a header's value across reads by concatenation: a value that never ends
    must stop being read once the head is past the limit."""
    protocol, wire = connection(App())
    sent = b"GET / HTTP/1.1\r\nx-big: "
    protocol.data_received(sent)
    while not wire.eof:
        protocol.data_received(b"v" * 1000)
        sent += b"v" * 1000
    assert LIMIT < len(sent) <= LIMIT + 1000  # refused by the read that went past the limit
    protocol.data_received(b"v" * 10_000_000)  # dropped: nothing more is parsed
    assert wire.statuses() == [431]


async def test_header_fields_up_to_the_limit_are_served_and_one_more_is_a_431() -> None:
    app, wire = await fed([head(fields=FIELDS)])
    assert wire.statuses() == [200]
    app, wire = await fed([head(fields=FIELDS + 1)])
    assert wire.statuses() == [431]
    assert app.seen == []
    assert str(FIELDS) in refusal(wire)["message"]


async def test_the_fields_of_a_head_never_ended_are_counted_and_not_kept() -> None:
    """Tiny fields in one read, never ended: refused at once, and what the parser made of them
    (a Python object each) is not kept while the connection lingers."""
    protocol, wire = connection(App())
    protocol.data_received(b"GET / HTTP/1.1\r\n" + b"a:\r\n" * (LIMIT // 4 - 10))
    assert wire.statuses() == [431]
    assert str(FIELDS) in refusal(wire)["message"]
    assert protocol.headers == []


async def test_a_refused_heads_fields_are_forgotten_not_an_earlier_requests() -> None:
    app = App()
    protocol, wire = connection(app)
    protocol.data_received(head("/a", fields=3) + head("/b", fields=FIELDS + 1))
    await settled()
    assert wire.statuses() == [200, 431]
    assert app.seen == [("/a", 3, 0)]


async def test_pipelined_heads_larger_together_than_the_limit_are_all_served() -> None:
    many = b"".join(head(f"/{n}", size=LIMIT // 2) for n in range(40))
    _, wire = await fed([many])
    assert wire.statuses() == [200] * 40
    _, wire = await fed([many[i : i + 1500] for i in range(0, len(many), 1500)])
    assert wire.statuses() == [200] * 40


async def test_a_body_read_with_its_head_does_not_count_as_head() -> None:
    body = b"x" * (20 * LIMIT)
    post = b"POST /p HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n\r\n" % len(body) + body
    app, wire = await fed([post + head("/next", size=LIMIT)])
    assert wire.statuses() == [200, 200]
    assert app.seen == [("/p", 2, len(body)), ("/next", 2, 0)]


async def test_a_refused_head_behind_pipelined_requests_is_answered_after_them() -> None:
    app, wire = await fed([head("/a") + head("/b") + head("/c", fields=FIELDS + 1)])
    assert wire.statuses() == [200, 200, 431]
    assert [path for path, _, _ in app.seen] == ["/a", "/b"]


def chunked(trailer: bytes) -> bytes:
    return (
        b"POST /t HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n"
        + trailer
        + b"\r\n"
    )


async def test_trailer_fields_within_the_limit_are_served() -> None:
    app, wire = await fed([chunked(b"x-sum: " + b"s" * (LIMIT // 2) + b"\r\n")])
    assert wire.statuses() == [200]
    assert app.seen[0][2] == 5


async def test_trailer_fields_past_the_limit_close_the_connection_without_an_answer() -> None:
    request = chunked(b"")[:-2]  # the trailer section, never ended
    protocol, wire = connection(App())
    protocol.data_received(request + b"x-sum: ")
    while not wire.closed:
        protocol.data_received(b"s" * 1000)
    assert wire.statuses() == []


async def test_a_client_asking_to_close_gets_its_early_answer_then_its_body_is_read() -> None:
    declared = 10 * LIMIT
    close = b"POST /big HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-length: %d\r\n\r\n"
    protocol, wire = connection(App(early_over=LIMIT))
    protocol.data_received(close % declared + b"x" * LIMIT)
    await settled()
    assert wire.statuses() == [413]
    assert not wire.closed  # closing now would reset the client's upload
    protocol.data_received(b"x" * (declared - 2 * LIMIT))
    assert not wire.closed
    protocol.data_received(b"x" * LIMIT + head("/after"))  # the body's end, then a request
    await settled()
    assert wire.closed  # drained: closed as asked, and what came after is not served
    assert wire.statuses() == [413]


async def test_a_closing_clients_body_that_never_ends_is_dropped_at_its_deadline() -> None:
    close = b"POST /big HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-length: 99999\r\n\r\n"
    protocol, wire = connection(App(early_over=LIMIT), body_timeout_s=0.05)
    protocol.data_received(close)
    await wire.shut.wait()  # the body's deadline closes it; pytest's timeout is the backstop
    assert wire.statuses() == [413]


async def test_pipelined_requests_are_parsed_only_a_few_ahead_of_their_answers() -> None:
    """256 KB of tiny pipelined GETs in one read (~12,000 requests): uvicorn queued each one
    parsed, with its scope and cycle, so the parser is fed only as far as `max_waiting` requests
    ahead; the rest waits unparsed, and every request is still answered, in order."""
    many = b"".join(b"GET /%d HTTP/1.1\r\n\r\n" % n for n in range(12_000))
    assert len(many) >= 256 * 1024
    app = App()
    protocol, wire = connection(app)
    ahead: list[int] = []
    served, done = app.__call__, asyncio.Event()

    async def noting(scope: Any, receive: Any, send: Any) -> None:
        ahead.append(len(protocol.pipeline))
        await served(scope, receive, send)
        if len(app.seen) == 12_000:
            done.set()

    app.__call__ = noting  # type: ignore[method-assign]
    protocol.app = noting
    protocol.data_received(many)
    bound = 12  # max_waiting (8), and the few a piece of 64 bytes may complete past a head's end
    assert len(protocol.pipeline) <= bound
    assert len(protocol.server_state.tasks) == 1
    await done.wait()  # pytest's timeout is the backstop
    assert max(ahead) <= bound
    assert [path for path, _, _ in app.seen] == [f"/{n}" for n in range(12_000)]
    assert wire.statuses() == [200] * 12_000
    assert not wire.closed


async def test_a_body_held_behind_waiting_requests_still_reaches_its_request() -> None:
    """Bodies of known length and chunked ones, pipelined behind enough GETs to be held, and
    split across reads anywhere: each request gets its own body."""
    body = b"b" * 3000
    post = b"POST /p HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n\r\n" % len(body) + body
    reads = b"".join([head(f"/{n}") for n in range(20)] + [post, chunked(b""), head("/end")])
    for size in (len(reads), 1000, 7):
        app, wire = await fed([reads[i : i + size] for i in range(0, len(reads), size)])
        assert wire.statuses() == [200] * 23
        assert app.seen[20:] == [("/p", 2, 3000), ("/t", 2, 5), ("/end", 1, 0)]


async def test_a_head_read_while_enough_requests_wait_counts_once() -> None:
    """A head at the limit arriving while `max_waiting` requests wait is held unparsed, then
    counted when parsed, not twice."""
    waiting = b"".join(head(f"/{n}") for n in range(9))  # one answered, 8 waiting
    _, wire = await fed([waiting, head("/last", size=LIMIT)])
    assert wire.statuses() == [200] * 10
