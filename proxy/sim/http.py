"""Small HTTP helpers shared by the simulator's routes: bounded body reading, JSON responses."""

from __future__ import annotations

import uuid
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from proxy.errors import APIError
from proxy.http.bodies import read_body
from proxy.schema import decode_json


async def read_json(request: Request, limit: int) -> dict[str, Any]:
    """The body as a JSON object; 413 past `limit` bytes, without reading the rest."""
    return decode_json(await read_body(request, limit))


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
