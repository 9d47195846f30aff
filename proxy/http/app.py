"""build_app(policy) -> the proxy's ASGI app: routes, one Services object, error rendering."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp

from policies.model import Policy
from policies.watcher import PolicyWatcher
from proxy.errors import APIError, error_body
from proxy.http.api_first import ApiFirst, api_error_response, unexpected_response
from proxy.http.handlers import API_HANDLERS, ROUTES, json_response
from proxy.http.middleware import RequestContext
from proxy.ops.loop_lag import watch_lag
from proxy.ops.metrics import ServicesCollector, metrics
from proxy.ops.observe import Observer
from proxy.services import Services


def build_app(policy: Policy, path: Path | None = None) -> ASGIApp:
    """The proxy; with `path`, the policy file is watched and reloaded (also on SIGHUP)."""

    registry = CollectorRegistry(auto_describe=True)
    observer = Observer(registry)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        services = await Services.start(policy)
        # What start-up built lives as long as the proxy: out of the collector's passes, which
        # otherwise walk it all again and again (hundreds of ms with litellm loaded).
        gc.collect()
        gc.freeze()
        # The request path makes no cycles of its own (proxy/http/disconnect.py breaks the one
        # it had): what it allocates is freed by reference counting, and a collection only
        # walks what is in flight. Python's default young pass, every 700 allocations, ran
        # every couple of requests and walked the requests in flight each time: 111k of the
        # 1.6M instructions a forwarded answer cost (callgrind). Every 10,000, a young pass
        # takes well under a millisecond. A full pass walks every live object: with thousands
        # of streams open one took 185-555 ms, and ran every ~1.5 s; now far rarer still.
        gc.set_threshold(10_000, 10, 100)
        lag = asyncio.get_running_loop().create_task(watch_lag(observer.loop_lag))
        app.state.services = services
        app.state.registry = registry
        app.state.observer = observer
        collector = ServicesCollector(services)
        registry.register(collector)
        observer.policy = lambda: services.policy
        watching = None
        if path is not None:
            services.watcher = PolicyWatcher(path, services.apply)
            watching = asyncio.get_running_loop().create_task(services.watcher.watch())
            _on_sighup(lambda: services.watcher.reload("SIGHUP") if services.watcher else None)
        try:
            yield
        finally:
            lag.cancel()
            if watching is not None:
                watching.cancel()
            await services.stop()
            registry.unregister(collector)

    app = Starlette(
        routes=[*ROUTES, Route("/metrics", metrics, methods=["GET"])],
        lifespan=lifespan,
        exception_handlers={
            APIError: _api_error,
            HTTPException: _http_error,
            Exception: _unexpected,
        },
    )
    return RequestContext(ApiFirst(app, API_HANDLERS), observer.finished)


def _on_sighup(callback: Callable[[], object]) -> None:
    with contextlib.suppress(NotImplementedError, RuntimeError):  # not on every platform
        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, callback)


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, APIError)
    return api_error_response(request, exc)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    kind = "not_found" if exc.status_code == 404 else "invalid_request_error"
    message = f"{request.method} {request.url.path}: {exc.detail}"
    return json_response(error_body(message, kind), exc.status_code)


async def _unexpected(request: Request, exc: Exception) -> Response:
    return unexpected_response(request, exc)
