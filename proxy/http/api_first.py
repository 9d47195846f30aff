"""The API's endpoints straight to their handlers; everything else through Starlette's app.

Starlette's layers (its error middleware, exception middleware, router and the endpoint
wrapper) each wrap the request and every `send`: for a forwarded answer they cost about 4% of
the proxy's CPU, and they add nothing to these handlers, which answer every error themselves
(an APIError as OpenAI's error body, anything else as a 500 and a log line). Other paths, other
methods and a mounted root path keep Starlette's routing (404s, 405s, the admin pages).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from proxy.errors import APIError, InternalError
from proxy.flow.record import record_of

log = logging.getLogger("overspill")

Handler = Callable[[Request], Awaitable[ASGIApp]]


class ApiFirst:
    def __init__(self, app: ASGIApp, handlers: Mapping[str, Handler]) -> None:
        self.app = app  # Starlette's: its state is the handlers' request.app.state
        self.handlers = dict(handlers)  # by path; POST only

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        handler = self._handler(scope)
        if handler is None:
            await self.app(scope, receive, send)
            return
        scope["app"] = self.app
        request = Request(scope, receive, send)
        try:
            response = await handler(request)
        except APIError as error:
            response = api_error_response(request, error)
        except Exception as exc:
            response = unexpected_response(request, exc)
        await response(scope, receive, send)

    def _handler(self, scope: Scope) -> Handler | None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope.get("root_path"):
            return None
        return self.handlers.get(scope["path"])


def api_error_response(request: Request, error: APIError) -> Response:
    """OpenAI's error body with the error's status and headers; the record notes the error."""
    record_of(request.scope.setdefault("state", {})).error = error.code or error.type
    return Response(error.render(), error.status, error.headers, media_type="application/json")


def unexpected_response(request: Request, exc: Exception) -> Response:
    """A bug of ours: still OpenAI's error shape (never a traceback), and the log has it."""
    log.exception("unexpected error on %s", request.url.path, exc_info=exc)
    error = InternalError(f"internal error ({type(exc).__name__}); see the proxy's log")
    return Response(error.render(), error.status, media_type="application/json")
