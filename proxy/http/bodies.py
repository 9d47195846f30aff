"""Read a request body with a size limit and a time limit, without buffering more than the
size limit: a client that trickles its body holds a connection only that long."""

from __future__ import annotations

import asyncio

from starlette.requests import Request

from proxy.errors import PayloadTooLarge, RequestTimeout


async def read_body(request: Request, limit: int, timeout_s: float | None = None) -> bytes:
    """The whole body; 413 as soon as it is known to exceed `limit` bytes, 408 when it has
    not arrived whole within `timeout_s`."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"request body of {declared} bytes exceeds the limit of {limit}")
    try:
        async with asyncio.timeout(timeout_s):
            return await _read(request, limit)
    except TimeoutError as exc:
        raise RequestTimeout(f"the request body did not arrive within {timeout_s:g} s") from exc


async def _read(request: Request, limit: int) -> bytes:
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"request body exceeds the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
