"""Pure ASGI middleware: a request ID on every response, and one access-log line per request.

Pure ASGI on purpose: Starlette's BaseHTTPMiddleware hides `http.disconnect` from the app, and
the proxy must see a client leave to stop the engine's work.
"""

from __future__ import annotations

import logging
import time
import uuid

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("overspill.access")


class RequestContext:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _incoming_id(scope) or uuid.uuid4().hex
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        started = time.perf_counter()
        status = 0

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message["headers"], (b"x-request-id", request_id.encode())]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            if log.isEnabledFor(logging.INFO):
                log.info(
                    orjson.dumps(
                        {
                            "request_id": request_id,
                            "method": scope["method"],
                            "path": scope["path"],
                            "status": status,
                            "route": state.get("route"),
                            "error": state.get("error"),
                            "ms": round((time.perf_counter() - started) * 1000, 2),
                        }
                    ).decode()
                )


def _incoming_id(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name == b"x-request-id":
            text: str = value.decode("latin-1").strip()
            # Keep the client's ID when it is sane; anything else gets a fresh one.
            if 0 < len(text) <= 128 and text.isprintable():
                return text
    return None
