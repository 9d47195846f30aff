"""Anthropic's Messages API, served by the cloud personality: POST /v1/messages.

What a provider with its own format receives, so that a cloud target reached through litellm's
translation (`model = "anthropic/..."`, `api_base` at the simulator) is tested end to end: the
request is checked as Anthropic checks it (an `x-api-key`, an `anthropic-version`, `max_tokens`
required, `system` a top-level field and never a message's role), recorded like every other,
and run on the same engine and queue as the OpenAI endpoints. Anthropic has no `seed`: the
same request gets the same words only at temperature 0. Its `max_tokens` caps the answer rather
than setting its length (see GenerationRequest.fills_max_tokens).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from proxy.errors import BadRequest, Unauthorized
from proxy.sim.anthropic_format import AnthropicFormat, error_body
from proxy.sim.http import echo_headers, json_response, read_json, request_id
from proxy.sim.requests import GenerationRequest
from proxy.sim.responder import SequenceResponse
from proxy.sim.simulator import Simulator
from proxy.sim.tokens import count_tokens, message_text, render_chat

PATH = "/v1/messages"
ROLES = ("user", "assistant")


def parse_messages(body: dict[str, Any]) -> GenerationRequest:
    """A Messages API body -> the engine's request; a 400 names the first bad field."""
    messages = _messages(body.get("messages"))
    system = _system(body.get("system"))
    turns = [{"role": "system", "content": system}] if system else []
    return GenerationRequest(
        model=_model(body.get("model")),
        prompt=render_chat([*turns, *messages]),
        max_tokens=_max_tokens(body.get("max_tokens")),
        stop=_stop_sequences(body.get("stop_sequences")),
        seed=None,
        temperature=_temperature(body.get("temperature")),
        stream=_stream(body.get("stream")),
        include_usage=False,
        echo=message_text(messages[-1]),
        fills_max_tokens=False,
    )


def check_headers(headers: dict[str, str]) -> None:
    """Anthropic refuses a call without a key or a version before it reads the body."""
    if not headers.get("x-api-key") and not headers.get("authorization"):
        raise Unauthorized("x-api-key header is required")
    if not headers.get("anthropic-version"):
        raise BadRequest("anthropic-version: header is required")


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return json_response(error_body(status, message), status, headers)


async def messages(request: Request) -> SequenceResponse:
    sim: Simulator = request.app.state.sim
    headers = dict(request.headers)
    check_headers(headers)
    body = await read_json(request, sim.profile.max_body_bytes)
    parsed = parse_messages(body)
    sim.admit(request.url.path, headers, body, parsed.model)
    rid = request_id(request)
    wire = AnthropicFormat(rid, parsed.model, count_tokens(parsed.prompt))
    return SequenceResponse(sim, (parsed,), wire, echo_headers(rid))


ROUTES = [Route(PATH, messages, methods=["POST"])]


# -- fields ----------------------------------------------------------------------------------


def _model(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise BadRequest("model: Field required", param="model")
    return value


def _max_tokens(value: Any) -> int:
    if value is None:
        raise BadRequest("max_tokens: Field required", param="max_tokens")
    if not _is_int(value) or value < 1:
        raise BadRequest("max_tokens: must be an integer of at least 1", param="max_tokens")
    return int(value)


def _messages(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not value:
        raise BadRequest("messages: at least one message is required", param="messages")
    for i, message in enumerate(value):
        _check_message(message, f"messages.{i}")
    return value


def _check_message(message: Any, where: str) -> None:
    if not isinstance(message, dict):
        raise BadRequest(f"{where}: Input should be an object", param=where)
    role = message.get("role")
    if role not in ROLES:
        raise BadRequest(
            f'{where}.role: Unexpected role "{role}". The Messages API accepts a top-level '
            '`system` parameter, not "system" as an input message role.'
            if role == "system"
            else f"{where}.role: Input should be 'user' or 'assistant'",
            param=f"{where}.role",
        )
    _check_content(message.get("content"), f"{where}.content")


def _check_content(content: Any, where: str) -> None:
    """A string, or content blocks: objects with a `type` (text blocks with a string `text`)."""
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise BadRequest(f"{where}: Input should be a string or a list of blocks", param=where)
    for i, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise BadRequest(f"{where}.{i}: a content block needs a type", param=f"{where}.{i}")
        if block["type"] == "text" and not isinstance(block.get("text"), str):
            raise BadRequest(f"{where}.{i}.text: Field required", param=f"{where}.{i}.text")


def _system(value: Any) -> str:
    """A string or text blocks; what the engine prefills before the messages."""
    if value is None:
        return ""
    _check_content(value, "system")
    return message_text({"content": value})


def _stop_sequences(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise BadRequest(
            "stop_sequences: Input should be a list of strings", param="stop_sequences"
        )
    return tuple(value)


def _temperature(value: Any) -> float:
    if value is None:
        return 1.0  # Anthropic's default
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= 1:
        raise BadRequest("temperature: must be a number between 0 and 1", param="temperature")
    return float(value)


def _stream(value: Any) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise BadRequest("stream: Input should be a valid boolean", param="stream")
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
