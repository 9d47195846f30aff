"""Ollama's native API: /api/chat and /api/generate (NDJSON streams by default), /api/tags,
/api/ps, /api/show, /api/version and /api/embed, enough for the official `ollama` client."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from proxy.errors import BadRequest
from proxy.sim.formats import OllamaFormat
from proxy.sim.http import echo_headers, json_response, read_json, request_id
from proxy.sim.models import OllamaModels, unknown_model
from proxy.sim.requests import parse_ollama
from proxy.sim.responder import SequenceResponse
from proxy.sim.simulator import Simulator
from proxy.sim.tokens import embed

# What `ollama list` would show for a 4-bit 8B model.
_MODEL_BYTES = 4_920_753_328
_VERSION = "0.12.6"


def _sim(request: Request) -> Simulator:
    sim: Simulator = request.app.state.sim
    return sim


def _models(sim: Simulator) -> OllamaModels:
    assert isinstance(sim.host, OllamaModels)  # this router is only mounted for ollama
    return sim.host


def _iso(timestamp: datetime) -> str:
    return timestamp.isoformat().replace("+00:00", "Z")


def _details() -> dict[str, Any]:
    return {
        "parent_model": "",
        "format": "gguf",
        "family": "llama",
        "families": ["llama"],
        "parameter_size": "8.0B",
        "quantization_level": "Q4_K_M",
    }


def _digest(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


async def chat(request: Request) -> SequenceResponse:
    return await _generate(request, chat=True)


async def generate(request: Request) -> SequenceResponse:
    return await _generate(request, chat=False)


async def _generate(request: Request, chat: bool) -> SequenceResponse:
    sim = _sim(request)
    body = await read_json(request, sim.profile.max_body_bytes)
    parsed = parse_ollama(body, chat=chat)
    sim.admit(request.url.path, dict(request.headers), body, parsed.model)
    models = _models(sim)
    cold = parsed.model not in models.loaded
    wire = OllamaFormat(parsed.model, chat=chat, load_seconds=sim.profile.load_ms / 1000 * cold)
    return SequenceResponse(sim, (parsed,), wire, echo_headers(request_id(request)))


async def tags(request: Request) -> Response:
    sim = _sim(request)
    modified = _iso(datetime(2026, 1, 1, tzinfo=UTC))
    models = [
        {
            "name": name,
            "model": name,
            "modified_at": modified,
            "size": _MODEL_BYTES,
            "digest": _digest(name),
            "details": _details(),
        }
        for name in sim.host.names
    ]
    return json_response({"models": models})


async def ps(request: Request) -> Response:
    models = _models(_sim(request))
    now = models.clock()
    wall = datetime.now(UTC).timestamp()
    loaded = []
    for name, entry in reversed(models.loaded.items()):  # most recently used first
        expires = "0001-01-01T00:00:00Z"  # Ollama's "never" for keep_alive < 0
        if entry.expires_at != float("inf"):
            expires = _iso(datetime.fromtimestamp(wall + entry.expires_at - now, UTC))
        loaded.append(
            {
                "name": name,
                "model": name,
                "size": _MODEL_BYTES,
                "digest": _digest(name),
                "details": _details(),
                "expires_at": expires,
                "size_vram": _MODEL_BYTES,
                "context_length": models.profile.max_model_len,
            }
        )
    return json_response({"models": loaded})


async def show(request: Request) -> Response:
    sim = _sim(request)
    body = await read_json(request, sim.profile.max_body_bytes)
    name = body.get("model") or body.get("name")
    if name not in sim.host.names:
        raise unknown_model(str(name), sim.host.names)
    return json_response(
        {
            "modelfile": f"FROM {name}\n",
            "parameters": "",
            "template": "{{ .Prompt }}",
            "details": _details(),
            "model_info": {
                "general.architecture": "llama",
                "llama.context_length": sim.profile.max_model_len,
            },
            "capabilities": ["completion"],
            "modified_at": _iso(datetime(2026, 1, 1, tzinfo=UTC)),
        }
    )


async def embed_route(request: Request) -> Response:
    sim = _sim(request)
    body = await read_json(request, sim.profile.max_body_bytes)
    model = body.get("model")
    if not isinstance(model, str):
        raise BadRequest("'model' is required", param="model")
    sim.admit(request.url.path, dict(request.headers), body, model)
    raw = body.get("input", body.get("prompt", ""))
    texts = [raw] if isinstance(raw, str) else list(raw)
    if not all(isinstance(text, str) for text in texts):
        raise BadRequest("'input' must be a string or an array of strings", param="input")
    vectors = [embed(text, sim.profile.embedding_dim) for text in texts]
    if request.url.path == "/api/embeddings":
        return json_response({"embedding": vectors[0] if vectors else []})
    return json_response({"model": model, "embeddings": vectors})


async def version(request: Request) -> Response:
    return json_response({"version": _VERSION})


async def root(request: Request) -> Response:
    return PlainTextResponse("Ollama is running")


ROUTES = [
    Route("/", root, methods=["GET", "HEAD"]),
    Route("/api/chat", chat, methods=["POST"]),
    Route("/api/generate", generate, methods=["POST"]),
    Route("/api/tags", tags, methods=["GET"]),
    Route("/api/ps", ps, methods=["GET"]),
    Route("/api/show", show, methods=["POST"]),
    Route("/api/embed", embed_route, methods=["POST"]),
    Route("/api/embeddings", embed_route, methods=["POST"]),
    Route("/api/version", version, methods=["GET"]),
]
