"""The simulator's own routes: /_sim/stats, /_sim/faults, /_sim/requests, and vLLM's /metrics
and /health."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from proxy.errors import NotFound
from proxy.sim.faults import Faults, merge_faults
from proxy.sim.http import json_response, read_json
from proxy.sim.metrics import render_vllm_metrics
from proxy.sim.simulator import Simulator


class Listener(Protocol):
    """What the server offers the outage fault: close the socket, reopen it later."""

    async def outage(self, seconds: float) -> None: ...


def _sim(request: Request) -> Simulator:
    sim: Simulator = request.app.state.sim
    return sim


def engine_stats(sim: Simulator) -> dict[str, Any]:
    engines: dict[str, dict[str, Any]] = {}
    for name, engine in sim.host.engines().items():
        stats = engine.stats
        engines[name] = {
            "running": len(engine.running),
            "waiting": len(engine.waiting),
            "kv_cache_usage": engine.pool.usage,
            "requests": stats.requests_received,
            "finished": dict(stats.finished),
            "aborted": stats.aborted,
            "prompt_tokens": stats.prompt_tokens,
            "generation_tokens": stats.generation_tokens,
            "prefill_tokens_computed": stats.prefill_tokens_computed,
            "prefix_cache_queries": stats.prefix_queries,
            "prefix_cache_hits": stats.prefix_hits,
            "preemptions": stats.preemptions,
            "steps": stats.steps,
        }
    totals = {
        key: sum(e[key] for e in engines.values())
        for key in ("requests", "aborted", "running", "waiting", "generation_tokens")
    }
    return {
        "personality": sim.personality,
        "models": list(sim.host.names),
        "engines": engines,
        **totals,
        "disconnects": sim.disconnects,
        "listener_outages": sim.listener_outages,
        "loads": getattr(sim.host, "loads", 0),
    }


async def stats(request: Request) -> Response:
    return json_response(engine_stats(_sim(request)))


async def faults(request: Request) -> Response:
    sim = _sim(request)
    if request.method == "POST":
        changes = await read_json(request, 64 * 1024)
        sim.faults = merge_faults(sim.faults, changes)
        outage = changes.get("listener_down_s")
        if outage:
            listener: Listener = request.app.state.listener
            sim.listener_outages += 1
            # After this response is sent: the listener goes down, then comes back by itself.
            request.app.state.background.add(asyncio.create_task(listener.outage(outage)))
    elif request.method == "DELETE":
        sim.faults = Faults()
    return json_response(sim.faults.__dict__)


async def requests_log(request: Request) -> Response:
    sim = _sim(request)
    if sim.log is None:
        raise NotFound("request recording is off (it is on for the cloud personality or --record)")
    if request.method == "DELETE":
        sim.log.clear()
    return json_response(sim.log.snapshot())


async def metrics(request: Request) -> Response:
    sim = _sim(request)
    text = "".join(render_vllm_metrics(name, engine) for name, engine in sim.host.engines().items())
    return PlainTextResponse(text, media_type="text/plain; version=0.0.4; charset=utf-8")


async def health(request: Request) -> Response:
    return Response(status_code=200)


CONTROL_ROUTES = [
    Route("/_sim/stats", stats, methods=["GET"]),
    Route("/_sim/faults", faults, methods=["GET", "POST", "DELETE"]),
    Route("/_sim/requests", requests_log, methods=["GET", "DELETE"]),
]
VLLM_ROUTES = [
    Route("/metrics", metrics, methods=["GET"]),
    Route("/health", health, methods=["GET"]),
]
