"""build_sim_app(config) -> a Starlette app with one personality's routes and engines."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import Scope

from proxy.errors import APIError, InternalError, error_body
from proxy.sim import anthropic_api, control, ollama_api, openai_api
from proxy.sim.compress import Compressing
from proxy.sim.engine import Engine
from proxy.sim.faults import Faults, GzipWhen
from proxy.sim.http import error_response, json_response
from proxy.sim.limits import RequestRateLimit
from proxy.sim.models import ModelHost, OllamaModels, SharedEngine
from proxy.sim.profile import EngineProfile, Personality
from proxy.sim.recorder import RequestLog
from proxy.sim.simulator import Simulator

DEFAULT_MODELS: dict[Personality, tuple[str, ...]] = {
    "vllm": ("meta-llama/Llama-3.1-8B-Instruct",),
    "ollama": ("llama3.1:8b",),
    "cloud": ("gpt-4o-mini",),
}


@dataclass(frozen=True)
class SimConfig:
    personality: Personality
    profile: EngineProfile
    models: tuple[str, ...] = ()
    faults: Faults = field(default_factory=Faults)
    seed: int = 0
    record: bool | None = None  # None: record on the cloud personality only
    record_limit: int = 100_000

    @property
    def served_models(self) -> tuple[str, ...]:
        return self.models or DEFAULT_MODELS[self.personality]


def _routes(personality: Personality) -> list[BaseRoute]:
    routes: list[BaseRoute] = [*openai_api.ROUTES, *control.CONTROL_ROUTES]
    if personality == "vllm":
        routes += control.VLLM_ROUTES
    if personality == "ollama":
        routes += ollama_api.ROUTES
    if personality == "cloud":
        routes += anthropic_api.ROUTES
    return routes


def _host(config: SimConfig, loop: asyncio.AbstractEventLoop) -> ModelHost:
    if config.personality == "ollama":
        return OllamaModels(config.served_models, config.profile, loop.time)
    engine = Engine(config.profile, loop.time, name=config.served_models[0])
    return SharedEngine(config.served_models, engine)


def build_sim_app(config: SimConfig) -> Starlette:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        record = config.record if config.record is not None else config.personality == "cloud"
        limit = config.profile.rate_limit_rpm
        app.state.sim = Simulator(
            personality=config.personality,
            profile=config.profile,
            host=_host(config, loop),
            clock=loop.time,
            rng=random.Random(config.seed),
            faults=config.faults,
            log=RequestLog(config.record_limit) if record else None,
            rate_limit=RequestRateLimit(limit) if limit else None,
        )
        app.state.background = set()
        yield
        await app.state.sim.host.stop()

    return Starlette(
        routes=_routes(config.personality),
        lifespan=lifespan,
        middleware=[Middleware(Compressing, when=_gzip_when)],
        exception_handlers={
            APIError: _api_error,
            HTTPException: _http_error,
            Exception: _unexpected,
        },
    )


def _gzip_when(scope: Scope) -> GzipWhen:
    sim: Simulator = scope["app"].state.sim
    return sim.faults.gzip


def _native_ollama(request: Request) -> bool:
    return request.url.path.startswith("/api/")


def _anthropic(request: Request) -> bool:
    # errors answer in the shape of the API that was called, as each provider does; only the
    # cloud personality serves Anthropic's
    sim: Simulator = request.app.state.sim
    return sim.personality == "cloud" and request.url.path == anthropic_api.PATH


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, APIError)
    if _native_ollama(request):
        return json_response({"error": exc.message}, exc.status, exc.headers)
    if _anthropic(request):
        return anthropic_api.error_response(exc.status, exc.message, exc.headers)
    return error_response(exc)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    kind = "not_found" if exc.status_code == 404 else "invalid_request_error"
    message = f"{request.method} {request.url.path}: {exc.detail}"
    if _anthropic(request):
        return anthropic_api.error_response(exc.status_code, message)
    return json_response(error_body(message, kind, None, None), exc.status_code)


async def _unexpected(request: Request, exc: Exception) -> Response:
    return await _api_error(request, InternalError(f"simulator error: {type(exc).__name__}"))
