"""Pure ASGI middleware: a request ID on every response; each request timed (to its first body
byte and to its end) and handed, with what the request path noted, to proxy/ops/observe.py.

Pure ASGI on purpose: Starlette's BaseHTTPMiddleware hides `http.disconnect` from the app, and
the proxy must see a client leave to stop the engine's work.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from proxy.flow.record import RECORD, Record
from proxy.ops.observe import Finished


class RequestContext:
    def __init__(self, app: ASGIApp, finished: Callable[[Finished], None]) -> None:
        self.app = app
        self.finished = finished

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # 128 random bits as uuid4().hex gives them, without building a UUID per request
        request_id = _incoming_id(scope) or os.urandom(16).hex()
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        record = state[RECORD] = Record(request_id)
        started = time.perf_counter()
        status, first_byte = 0, None

        async def send_with_id(message: Message) -> None:
            nonlocal status, first_byte
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message["headers"], (b"x-request-id", request_id.encode())]
            elif first_byte is None and message.get("body"):
                first_byte = time.perf_counter() - started
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            seconds = time.perf_counter() - started
            done = Finished(scope["method"], scope["path"], status, seconds, first_byte, record)
            self.finished(done)


def _incoming_id(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name == b"x-request-id":
            text: str = value.decode("latin-1").strip()
            # Keep the client's ID when it is sane; anything else gets a fresh one.
            if 0 < len(text) <= 128 and text.isprintable():
                return text
    return None
