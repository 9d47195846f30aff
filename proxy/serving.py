"""Run an ASGI app with uvicorn on a socket bound beforehand.

Binding first makes `--port 0` race-free (the chosen port is printed on the first line, and
connections made from then on wait in the backlog until served) and lets a server close and reopen
its listener (the simulator's outage fault).
"""

from __future__ import annotations

import socket

import uvicorn
from starlette.types import ASGIApp

from proxy.head_deadline import with_head_deadline


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
    ) -> None:
        """`max_connections`: connections and requests at once, beyond which uvicorn answers
        503 at once (None: no limit). `header_timeout_s`: how long a request's head may take to
        arrive (None: for ever, as plain uvicorn); `body_timeout_s`: how long after its head a body
        answered early is still read and dropped (not reset under the client's upload)."""
        self.sock = bind(host, port)
        self.host, self.port = self.sock.getsockname()[:2]
        protocol = (
            with_head_deadline(header_timeout_s, body_timeout_s) if header_timeout_s else None
        )
        config = uvicorn.Config(
            app,
            loop="uvloop",
            http=protocol or "httptools",
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

    def run(self) -> None:
        self.server.run(sockets=[self.sock])
