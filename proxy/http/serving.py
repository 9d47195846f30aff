"""Run an ASGI app with uvicorn on a socket bound beforehand.

Binding first makes `--port 0` race-free (the chosen port is printed on the first line, and
connections made from then on wait in the backlog until served) and lets a server close and reopen
its listener (the simulator's outage fault).
"""

from __future__ import annotations

import signal
import socket
import threading
from types import FrameType

import uvicorn
from starlette.types import ASGIApp

from proxy.http.connection import Facts
from proxy.http.head_deadline import with_head_limits


def bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.setblocking(False)
    return sock


class Server:
    def __init__(
        self,
        app: ASGIApp,
        host: str,
        port: int,
        log_level: str = "warning",
        max_connections: int | None = None,
        header_timeout_s: float | None = None,
        body_timeout_s: float = 30.0,
        max_head_bytes: int = 64 * 1024,
        max_headers: int = 256,
        facts: bool = True,
    ) -> None:
        """`max_connections`: connections and requests at once, beyond which uvicorn answers
        503 at once (None: no limit). `header_timeout_s`: how long a request's head may take to
        arrive (None: for ever, and no limit on its size, as plain uvicorn); `body_timeout_s`: how
        long after its head a body answered early is still read and dropped (not reset under the
        client's upload); `max_head_bytes`, `max_headers`: a larger head gets a 431.
        `facts`: tell the app what proxy/http/connection.py says (else plain uvicorn)."""
        self.sock = bind(host, port)
        self.host, self.port = self.sock.getsockname()[:2]
        protocol: type[Facts] | str = Facts if facts else "httptools"
        if header_timeout_s:
            protocol = with_head_limits(
                header_timeout_s, body_timeout_s, max_head_bytes, max_headers
            )
        config = uvicorn.Config(
            app,
            loop="uvloop",
            http=protocol,
            lifespan="on",
            log_level=log_level,
            access_log=False,
            timeout_graceful_shutdown=2,
            backlog=2048,
            limit_concurrency=max_connections,
        )
        self.server = uvicorn.Server(config)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def run(self) -> int | None:
        """Serve until SIGINT or SIGTERM; returns the signal that stopped it (None: none did).

        uvicorn shuts down gracefully on either, then raises the signal again to the handler it
        found at start, which by default ends the process with a traceback (SIGINT) or before
        any cleanup (SIGTERM). The handler installed here only notes it, so the caller unwinds
        normally: child processes stopped, temporary files removed, exit status its own."""
        if threading.current_thread() is not threading.main_thread():
            self.server.run(sockets=[self.sock])  # no signals off the main thread (benches)
            return None
        stopped: list[int] = []

        def note(signum: int, frame: FrameType | None) -> None:
            stopped.append(signum)

        previous = {sig: signal.signal(sig, note) for sig in _STOP_SIGNALS}
        try:
            self.server.run(sockets=[self.sock])
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return stopped[0] if stopped else None


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
