"""A body over max_body_bytes is refused from its Content-Length, before it has arrived: the
client, still uploading, must get the 413 and not "connection reset by peer". The proxy reads
and drops the rest of the body (until the body's own deadline), as nginx's lingering close does.
Real processes: a simulator behind the proxy, a raw socket as the client."""

from __future__ import annotations

import contextlib
import json
import select
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from tests.processes import FAST_ENGINE, Process, backend_toml, proxy, sim

LIMIT = 1 << 20
DECLARED = 64 << 20
HEADER_TIMEOUT_S = 0.5


def config(engine: str, body_timeout_s: float) -> str:
    return (
        f"[server]\nmax_body_bytes = {LIMIT}\nheader_timeout_s = {HEADER_TIMEOUT_S}\n"
        f"body_timeout_s = {body_timeout_s}\n[cache]\nsemantic = false\n"
        f"{backend_toml('local', 'vllm', engine)}"
    )


@pytest.fixture
def engine() -> Iterator[Process]:
    with sim(*FAST_ENGINE, "--model", "sim-model") as engine:
        yield engine


def connect(p: Process) -> socket.socket:
    host, port = p.url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=60)


def upload_head(conn: socket.socket, extra: bytes = b"") -> None:
    conn.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n"
        b"content-type: application/json\r\n%s"
        b"content-length: %d\r\n\r\n" % (extra, DECLARED)
    )
    conn.sendall(b"x" * LIMIT)


def answered(conn: socket.socket) -> None:
    """Wait until the proxy's answer is in the socket, without reading it (a client that reads
    only once its upload is done)."""
    readable, _, _ = select.select([conn], [], [], 60)
    assert readable, "no answer within 60 s"


def read_response(conn: socket.socket) -> tuple[bytes, bytes]:
    """Status line + headers, and the body of one Content-Length response."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, body = data.split(b"\r\n\r\n", 1)
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += conn.recv(65536)
    return head, body


def test_a_client_still_uploading_gets_its_413_and_keeps_its_connection(engine: Process) -> None:
    with proxy(config(engine.url, body_timeout_s=120)) as p, connect(p) as conn:
        upload_head(conn)
        answered(conn)
        # Longer than a head may take: the old proxy closed here, under the upload.
        time.sleep(3 * HEADER_TIMEOUT_S)
        remaining = DECLARED - LIMIT
        chunk = b"x" * (1 << 20)
        while remaining:
            conn.sendall(chunk[:remaining])
            remaining -= min(remaining, len(chunk))
        head, body = read_response(conn)
        assert head.startswith(b"HTTP/1.1 413")
        error = json.loads(body)["error"]
        assert error["code"] == "request_too_large"
        assert str(LIMIT) in error["message"]
        # The body was drained: the same connection carries the next request.
        conn.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        head, _ = read_response(conn)
        assert head.startswith(b"HTTP/1.1 200")


def test_a_body_that_never_ends_is_dropped_at_its_deadline(engine: Process) -> None:
    """Lingering is bounded by the body's own deadline: a client that stops mid-upload after
    its 413 does not hold the connection for ever."""
    with proxy(config(engine.url, body_timeout_s=1)) as p, connect(p) as conn:
        upload_head(conn)
        head, _ = read_response(conn)
        assert head.startswith(b"HTTP/1.1 413")
        closed = False
        while not closed:  # until the proxy closes it; pytest's timeout is the backstop
            try:
                closed = conn.recv(65536) == b""
            except ConnectionResetError:
                closed = True


def test_a_client_that_asks_to_close_gets_its_413_not_a_broken_pipe(engine: Process) -> None:
    """Python's urllib sends `Connection: close` and its whole body before it reads: the
    proxy's answer must wait in its socket while the upload goes on."""
    with proxy(config(engine.url, body_timeout_s=120)) as p:
        request = urllib.request.Request(
            p.url + "/v1/chat/completions",
            data=b"x" * DECLARED,
            headers={"content-type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=60)
        assert refused.value.code == 413
        assert json.loads(refused.value.read())["error"]["code"] == "request_too_large"


def test_a_connection_asked_to_close_closes_once_its_body_is_drained(engine: Process) -> None:
    with proxy(config(engine.url, body_timeout_s=120)) as p, connect(p) as conn:
        upload_head(conn, b"connection: close\r\n")
        answered(conn)
        remaining = DECLARED - LIMIT - 1024
        chunk = b"x" * (1 << 20)
        while remaining:
            conn.sendall(chunk[:remaining])
            remaining -= min(remaining, len(chunk))
        # The body's end, and a request the proxy must not serve: it was asked to close
        conn.sendall(b"x" * 1024 + b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        head, _ = read_response(conn)
        assert head.startswith(b"HTTP/1.1 413")
        assert b"connection: close" in head.lower()
        rest = b""
        with contextlib.suppress(ConnectionResetError):  # (the request, if read apart, unread)
            while more := conn.recv(65536):  # until the proxy closes; pytest's timeout is the
                rest += more  # backstop
        assert rest == b""
