"""Thin endpoints: read and parse the request, hand it to the pipeline, or report state."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from cache.verifier import STEPS, Verifier
from policies.identity import Identity
from policies.model import Backend
from proxy.endpoints import ENDPOINTS, Endpoint, endpoint_named
from proxy.errors import APIError, InternalError, NotFound, Unauthorized
from proxy.flow.caller import OFFLOAD_PARSE_BYTES
from proxy.flow.pipeline import Pipeline
from proxy.flow.record import record_of
from proxy.http.bodies import read_body
from proxy.http.client_headers import client_headers
from proxy.http.connection import connection_of
from proxy.http.disconnect import DisconnectWatch
from proxy.http.reply import Reply
from proxy.ops.explain import explanation
from proxy.ops.observe import Observer
from proxy.schema import ProxyRequest, parse_request
from proxy.services import Services

log = logging.getLogger("overspill")


def json_response(payload: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(payload), status, media_type="application/json")


def _services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


@dataclass
class PipelineResponse:
    """Runs the pipeline inside the response, watching for the client to leave meanwhile."""

    pipeline: Pipeline
    request: ProxyRequest
    request_id: str
    headers: dict[str, str]
    identity: Identity

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with DisconnectWatch(receive, connection_of(scope)) as watch:
            reply = Reply(send, watch, record_of(scope.setdefault("state", {})))
            try:
                answer = self.pipeline.run(
                    self.request, reply.record, self.request_id, self.headers, self.identity
                )
                async with answer as (head, chunks):
                    await reply.deliver(head, chunks)
            except APIError as error:
                await reply.fail(error)
            except Exception as exc:  # a bug of ours: still an OpenAI-shaped answer, and a log
                log.exception("request %s failed", self.request_id, exc_info=exc)
                await reply.fail(InternalError(f"internal error ({type(exc).__name__})"))
        if watch.disconnected:
            reply.record.error = "client_disconnected"


async def read_request(request: Request, services: Services, endpoint: Endpoint) -> ProxyRequest:
    """The body, read within the policy's size and time limits and parsed; in a worker thread
    for a large body (a few megabytes of tiny values take a while to check, and other requests
    go on meanwhile)."""
    server = services.policy.server
    raw = await read_body(request, server.max_body_bytes, server.body_timeout_s)
    if len(raw) < OFFLOAD_PARSE_BYTES:
        return parse_request(endpoint, raw)
    return await asyncio.to_thread(parse_request, endpoint, raw)


def _endpoint(endpoint: Endpoint) -> Any:
    async def handle(request: Request) -> PipelineResponse:
        services = _services(request)
        headers = client_headers(request.headers.raw)
        pipeline = services.pipeline
        identity = pipeline.identify(headers)
        parsed = await read_request(request, services, endpoint)
        request_id = request.scope["state"]["request_id"]  # set by middleware.py
        return PipelineResponse(pipeline, parsed, request_id, headers, identity)

    return handle


async def list_models(request: Request) -> Response:
    models = _services(request).runtime.backends.snapshot().public_models()
    data = [{"id": m, "object": "model", "created": 0, "owned_by": "overspill"} for m in models]
    return json_response({"object": "list", "data": data})


async def healthz(request: Request) -> Response:
    return json_response({"status": "ok"})


async def readyz(request: Request) -> Response:
    snapshot = _services(request).runtime.backends.snapshot()
    usable = [b.name for b in snapshot.backends if b.healthy]
    down = {b.name: b.error for b in snapshot.backends if not b.healthy}
    status = 200 if usable else 503
    return json_response({"ready": bool(usable), "usable": usable, "down": down}, status)


async def admin_status(request: Request) -> Response:
    services = _services(request)
    backends = [_backend_status(services, backend) for backend in services.policy.backends]
    now = services.runtime.clock.now()
    breakers = {
        name: {"state": b.state_at(now), "last_failure": b.last_failure}
        for name, b in services.pipeline.breakers.items()
    }
    return json_response(
        {
            "policy": _policy_status(services),
            "uptime_s": round(now - services.started, 3),
            "backends": backends,
            "clouds": [{"name": c.name, "model": c.model} for c in services.policy.clouds],
            "breakers": breakers,
            "cache": _cache_status(services),
            "balancing": {
                "strategy": services.policy.balancing.strategy,
                "prefix_blocks_known": len(services.runtime.affinity.index),
                "waited_for_a_prefill": services.runtime.affinity.waited,
            },
            "routes": _routes(services),
            "tenants": _tenants(services),
            "cloud_spend_usd": round(services.runtime.cloud.spent, 6),
        }
    )


def _routes(services: Services) -> list[dict[str, Any]]:
    room = services.runtime.room
    return [
        {
            "model": r.model,
            "local": list(r.local),
            "cloud": list(r.cloud),
            "deadline_s": r.deadline_s,
            "waiting": room.waiting(r.model),
        }
        for r in services.policy.routes
    ]


def _tenants(services: Services) -> list[dict[str, Any]]:
    gate = services.runtime.gate
    return [
        {
            "name": t.name,
            "privacy": t.privacy,
            "priority": t.priority,
            "keys": len(t.api_keys),
            "in_flight": gate.load(t.name).in_flight,
            "requests_per_minute": t.limits.requests_per_minute,
            "tokens_per_minute": t.limits.tokens_per_minute,
            "cloud_budget_usd": t.cloud_budget_usd,
            "cloud_spent_usd": round(gate.spent(t), 6),
        }
        for t in services.policy.tenants
    ]


async def admin_traffic(request: Request) -> Response:
    """The last minutes of traffic and the last decisions, for the dashboard."""
    observer: Observer = request.app.state.observer
    return json_response(observer.recent.snapshot())


async def dashboard(request: Request) -> Response:
    """The admin page: static (no data in it, so no key needed to load it); its script asks
    the admin endpoints, with the admin key when one is set."""
    page = resources.files("proxy.ops").joinpath("dashboard.html").read_bytes()
    return Response(
        page, media_type="text/html; charset=utf-8", headers={"cache-control": "no-store"}
    )


def _cache_status(services: Services) -> dict[str, Any]:
    answers = services.runtime.answers
    return {
        "enabled": services.policy.cache.enabled,
        "entries": len(answers.cache),
        "searchable": answers.cache.searchable,
        "indexes_approximate": answers.cache.approximate,
        "indexes_building": answers.cache.building,
        # Loaded on the first semantic lookup; until the referee is, borderline ones are misses.
        "embedder_ready": bool(answers.embedder and answers.embedder.ready),
        "referee_ready": answers.referee.embeds.ready if answers.referee else None,
        # Loaded (made first, if it must be) with the embedder; until it is, no semantic hits.
        "verifier_ready": answers.verifier.ready if answers.verifier else None,
        # How many readings its verdicts took: one when the first refused, two when it agreed.
        "verifier_verdicts": (
            {step: answers.verifier.steps[step] for step in STEPS}
            if isinstance(answers.verifier, Verifier)
            else None
        ),
        "path": str(services.cache_path) if services.cache_path else None,
        "in_flight_shared": len(answers.coalescer.flights),
        **vars(answers.cache.stats),
        "coalesced": answers.coalescer.joined,
    }


def _policy_status(services: Services) -> dict[str, Any]:
    watcher = services.watcher
    last = watcher.last if watcher else None
    return {
        "source": services.policy.source,
        "last_reload": None
        if last is None
        else {
            "ok": last.ok,
            "trigger": last.trigger,
            "at": last.at,
            "problems": list(last.problems),
        },
        "reloads": dict(watcher.counts) if watcher else {},
    }


async def admin_reload(request: Request) -> Response:
    services = _services(request)
    if services.watcher is None:
        raise NotFound("this proxy runs without a policy file to reload")
    result = services.watcher.reload("admin")
    body = {"ok": result.ok, "problems": list(result.problems)}
    return json_response(body, 200 if result.ok else 422)


async def admin_explain(request: Request) -> Response:
    services = _services(request)
    endpoint = endpoint_named(request.query_params.get("endpoint", "chat")).name
    headers = client_headers(request.headers.raw)  # the tenant a request would name, sans key
    parsed = await read_request(request, services, endpoint)
    privacy, plan = await services.pipeline.explain(parsed, headers)
    return json_response(explanation(parsed, privacy, plan))


def _backend_status(services: Services, backend: Backend) -> dict[str, Any]:
    view = services.runtime.backends[backend.name].view()
    loaded = sorted(view.loaded_models) if view.loaded_models is not None else None
    return {
        "name": backend.name,
        "kind": backend.kind,
        "url": backend.url,
        "healthy": view.healthy,
        "error": view.error,
        "models": view.models,
        "in_flight": view.in_flight,
        "load": {
            "running": view.running,
            "waiting": view.waiting,
            "kv_cache_usage": view.kv_cache_usage,
            "loaded_models": loaded,
        },
    }


def _admin(handler: Callable[[Request], Awaitable[Response]]) -> Any:
    """An admin endpoint: it needs an admin key when the policy has any ([auth] admin_keys)."""

    async def guarded(request: Request) -> Response:
        if not _services(request).pipeline.keys.is_admin(request.headers.get("authorization")):
            raise Unauthorized(
                "this admin endpoint needs an admin key: Authorization: Bearer <key>"
            )
        return await handler(request)

    return guarded


# The API's endpoints by path (POST): proxy/http/api_first.py sends them here directly.
API_HANDLERS = {spec.path: _endpoint(spec.name) for spec in ENDPOINTS.values()}
ROUTES = [
    *(Route(path, handle, methods=["POST"]) for path, handle in API_HANDLERS.items()),
    Route("/v1/models", list_models, methods=["GET"]),
    Route("/healthz", healthz, methods=["GET"]),
    Route("/readyz", readyz, methods=["GET"]),
    Route("/admin", dashboard, methods=["GET"]),
    Route("/admin/status", _admin(admin_status), methods=["GET"]),
    Route("/admin/traffic", _admin(admin_traffic), methods=["GET"]),
    Route("/admin/reload", _admin(admin_reload), methods=["POST"]),
    Route("/admin/explain", _admin(admin_explain), methods=["POST"]),
]
