"""The OpenAI-compatible routes every personality serves: /v1/chat/completions, /v1/completions,
/v1/embeddings and /v1/models."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from proxy.sim.formats import OpenAIFormat
from proxy.sim.http import echo_headers, json_response, read_json, request_id
from proxy.sim.requests import parse_chat, parse_completions, parse_embeddings
from proxy.sim.responder import SequenceResponse
from proxy.sim.simulator import Simulator
from proxy.sim.tokens import embed

OWNED_BY = {"vllm": "vllm", "ollama": "library", "cloud": "openai"}


def _sim(request: Request) -> Simulator:
    sim: Simulator = request.app.state.sim
    return sim


async def chat_completions(request: Request) -> SequenceResponse:
    return await _generate(request, chat=True)


async def completions(request: Request) -> SequenceResponse:
    return await _generate(request, chat=False)


async def _generate(request: Request, chat: bool) -> SequenceResponse:
    sim = _sim(request)
    body = await read_json(request, sim.profile.max_body_bytes)
    # A completions request answers each prompt of a batched `prompt`: one request per prompt.
    parsed = (parse_chat(body),) if chat else parse_completions(body)
    head = parsed[0]
    sim.admit(request.url.path, dict(request.headers), body, head.model)  # recorded once
    rid = request_id(request)
    wire = OpenAIFormat(
        rid,
        head.model,
        chat=chat,
        include_usage=head.include_usage,
        vllm_style=sim.personality == "vllm",
        logprobs=head.logprobs,
    )
    early = sim.personality == "vllm"
    return SequenceResponse(sim, parsed, wire, echo_headers(rid), headers_first=early)


async def embeddings(request: Request) -> Response:
    sim = _sim(request)
    body = await read_json(request, sim.profile.max_body_bytes)
    parsed = parse_embeddings(body)
    sim.admit(request.url.path, dict(request.headers), body, parsed.model)
    engine = await sim.host.acquire(parsed.model)
    try:
        seqs = sim.embedding_sequences(engine, parsed.inputs)
        for seq in seqs:
            engine.submit(seq)
        try:
            await asyncio.gather(*(seq.done.wait() for seq in seqs))
        finally:
            for seq in seqs:
                engine.abort(seq)
    finally:
        sim.host.release(parsed.model)
    dim = sim.profile.embedding_dim
    data = [
        {"object": "embedding", "index": i, "embedding": embed(text, dim)}
        for i, text in enumerate(parsed.inputs)
    ]
    tokens = sum(len(seq.prompt) for seq in seqs)
    return json_response(
        {
            "object": "list",
            "data": data,
            "model": parsed.model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        },
        headers={"x-request-id": request_id(request)},
    )


async def list_models(request: Request) -> Response:
    sim = _sim(request)
    created = int(time.time())
    models: list[dict[str, Any]] = [
        {
            "id": name,
            "object": "model",
            "created": created,
            "owned_by": OWNED_BY[sim.personality],
            "max_model_len": sim.profile.max_model_len,
        }
        for name in sim.host.names
    ]
    return json_response({"object": "list", "data": models})


ROUTES = [
    Route("/v1/chat/completions", chat_completions, methods=["POST"]),
    Route("/v1/completions", completions, methods=["POST"]),
    Route("/v1/embeddings", embeddings, methods=["POST"]),
    Route("/v1/models", list_models, methods=["GET"]),
]
