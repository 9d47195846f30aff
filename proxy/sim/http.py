"""Small HTTP helpers shared by the simulator's routes: bounded body reading, JSON responses."""

from __future__ import annotations

import uuid
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from proxy.errors import APIError, PayloadTooLarge
from proxy.sim.requests import decode_json


async def read_json(request: Request, limit: int) -> dict[str, Any]:
    """The body as a JSON object; 413 past `limit` bytes, without reading the rest."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"request body of {declared} bytes exceeds the limit of {limit}")
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"request body exceeds the limit of {limit} bytes")
        chunks.append(chunk)
    return decode_json(b"".join(chunks))


def json_response(
    payload: Any, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    return Response(orjson.dumps(payload), status, headers, media_type="application/json")


def error_response(error: APIError) -> Response:
    return Response(error.render(), error.status, error.headers, media_type="application/json")


def request_id(request: Request) -> str:
    """The caller's X-Request-ID, so a request can be followed from proxy to engine."""
    return request.headers.get("x-request-id") or uuid.uuid4().hex


def echo_headers(rid: str) -> list[tuple[bytes, bytes]]:
    return [(b"x-request-id", rid.encode("latin-1"))]
