"""Read a request body with a size limit and a time limit, without buffering more than the
size limit: a client that trickles its body holds a connection only that long. A body already
all in (most: small bodies come with their heads) is read without the timer."""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.types import Receive

from proxy.errors import ClientGone, PayloadTooLarge, RequestTimeout
from proxy.http.connection import connection_of


async def read_body(request: Request, limit: int, timeout_s: float | None = None) -> bytes:
    """The whole body; 413 as soon as it is known to exceed `limit` bytes, 408 when it has
    not arrived whole within `timeout_s`."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"request body of {declared} bytes exceeds the limit of {limit}")
    connection = connection_of(request.scope)
    if connection is not None and connection.body_arrived():
        return await _read(request.receive, limit)
    try:
        async with asyncio.timeout(timeout_s):
            return await _read(request.receive, limit)
    except TimeoutError as exc:
        raise RequestTimeout(f"the request body did not arrive within {timeout_s:g} s") from exc


async def _read(receive: Receive, limit: int) -> bytes:
    chunks = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone("the client left before its request's body arrived")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"request body exceeds the limit of {limit} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)
