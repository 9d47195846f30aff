"""The simulator's server: uvicorn on a socket we own, so the listener can go down and up."""

from __future__ import annotations

import asyncio
import sys

from starlette.applications import Starlette

from proxy.http.serving import Server, bind


class SimServer(Server):
    def __init__(self, app: Starlette, host: str, port: int, log_level: str = "warning") -> None:
        super().__init__(app, host, port, log_level)
        app.state.listener = self

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
