"""Read a request body with a size limit, without buffering more than the limit."""

from __future__ import annotations

from starlette.requests import Request

from proxy.errors import PayloadTooLarge


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body; 413 as soon as it is known to exceed `limit` bytes."""
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
    return b"".join(chunks)
