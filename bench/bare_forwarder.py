"""The floor any Python proxy can reach here: Starlette + one aiohttp session, nothing else.

python -m bench.bare_forwarder UPSTREAM_URL   (prints its own URL on the first line)
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator

import aiohttp
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from proxy.http.serving import Server
from proxy.legs.upstream import KEEPALIVE_S


def build(upstream: str) -> Starlette:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # idle connections kept as Overspill keeps them (below the engine's own keep-alive),
        # so neither races the engine closing one
        connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=KEEPALIVE_S)
        app.state.session = aiohttp.ClientSession(connector=connector)
        yield
        await app.state.session.close()

    async def forward(request: Request) -> Response:
        session: aiohttp.ClientSession = request.app.state.session
        upstream_response = await session.post(
            upstream + request.url.path,
            data=await request.body(),
            headers={"content-type": "application/json"},
        )
        if "text/event-stream" in upstream_response.headers.get("content-type", ""):

            async def chunks() -> AsyncIterator[bytes]:
                async for chunk in upstream_response.content.iter_any():
                    yield chunk

            return StreamingResponse(chunks(), media_type="text/event-stream")
        body = await upstream_response.read()
        return Response(body, upstream_response.status, media_type="application/json")

    return Starlette(
        routes=[Route("/v1/chat/completions", forward, methods=["POST"])], lifespan=lifespan
    )


if __name__ == "__main__":
    server = Server(build(sys.argv[1]), "127.0.0.1", 0, facts=False)  # plain uvicorn
    print(f"bare forwarder listening on {server.url}", flush=True)
    server.run()
