"""Serve a simulator app with uvicorn on a socket we own, so the listener can go down and up.

Binding the socket ourselves also makes `--port 0` race-free: the chosen port is printed on the
first line of output, and connections made from then on wait in the backlog until served.
"""

from __future__ import annotations

import asyncio
import socket
import sys

import uvicorn
from starlette.applications import Starlette


def bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.setblocking(False)
    return sock


class SimServer:
    def __init__(self, app: Starlette, host: str, port: int, log_level: str = "warning") -> None:
        self.sock = bind(host, port)
        self.host, self.port = self.sock.getsockname()[:2]
        config = uvicorn.Config(
            app,
            loop="uvloop",
            http="httptools",
            lifespan="on",
            log_level=log_level,
            access_log=False,
            timeout_graceful_shutdown=1,
            backlog=2048,
        )
        self.server = uvicorn.Server(config)
        app.state.listener = self

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def run(self) -> None:
        self.server.run(sockets=[self.sock])

    async def outage(self, seconds: float) -> None:
        """A full stop: refuse new connections and cut open ones, then listen again."""
        await asyncio.sleep(0.05)  # let the response that asked for it reach the client
        for listening in self.server.servers:
            listening.close()
        for connection in list(self.server.server_state.connections):
            transport = getattr(connection, "transport", None)
            if transport is not None:
                transport.abort()
        await asyncio.sleep(seconds)
        self.sock = bind(self.host, self.port)
        loop = asyncio.get_running_loop()
        config = self.server.config
        state = self.server.server_state
        app_state = self.server.lifespan.state

        def protocol() -> asyncio.Protocol:
            # uvicorn's own protocol factory, as Server.startup builds it.
            made: asyncio.Protocol = config.http_protocol_class(  # type: ignore[call-arg]
                config=config, server_state=state, app_state=app_state
            )
            return made

        self.server.servers = [await loop.create_server(protocol, sock=self.sock)]
        print(f"listener back on {self.url}", file=sys.stderr, flush=True)
