"""Answers gzip-compressed, as many providers answer (OpenAI behind Cloudflare, gateways with a
compression filter): the `gzip` fault, "accepted" (to a caller whose Accept-Encoding takes
gzip, as they do) or "always" (to any caller: a gateway that ignores what was asked). A proxy
that relays a provider's bytes must ask for identity, and refuse what it still cannot read;
this is what shows it does.

Whole bodies and streams alike: each body part is compressed and flushed at once (a sync
flush), so a stream still arrives event by event, as Cloudflare's compressed streams do. The
length of a compressed body is not known in advance: the header goes, and uvicorn sends it
chunked.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from proxy.sim.faults import GzipWhen

_GZIP_WBITS = 31  # zlib's gzip container
_DROPPED = {b"content-length", b"content-encoding"}
# The API's answers (POSTs): what a proxy relays. Probes (/health, /metrics, model lists) and
# the simulator's own /_sim/ routes answer plain: a test sees the relay's defence, not a
# backend marked down.
_API = ("/v1/", "/api/")


def accepts_gzip(header: str) -> bool:
    """Whether an Accept-Encoding value accepts gzip (RFC 9110: `gzip` or `*`, without q=0)."""
    for item in header.split(","):
        coding, _, params = item.partition(";")
        if coding.strip().lower() not in ("gzip", "x-gzip", "*"):
            continue
        quality = params.strip().lower().removeprefix("q=")
        if not quality.replace(".", "", 1).isdigit() or float(quality) > 0:
            return True
    return False


class Gzipped:
    """One response's `send`, with its body compressed (a gzip member over all its parts)."""

    def __init__(self, send: Send) -> None:
        self.send = send
        self.packer = zlib.compressobj(wbits=_GZIP_WBITS)

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = [(k, v) for k, v in message.get("headers", []) if k.lower() not in _DROPPED]
            headers += [(b"content-encoding", b"gzip"), (b"vary", b"accept-encoding")]
            await self.send({**message, "headers": headers})
            return
        if message["type"] == "http.response.body":
            more = message.get("more_body", False)
            body = self.packer.compress(message.get("body", b""))
            body += self.packer.flush(zlib.Z_SYNC_FLUSH if more else zlib.Z_FINISH)
            await self.send({**message, "body": body})
            return
        await self.send(message)


class Compressing:
    """ASGI middleware: gzip as `when(scope)` says (the fault, read per request); anything else
    passes untouched."""

    def __init__(self, app: ASGIApp, when: Callable[[Scope], GzipWhen]) -> None:
        self.app = app
        self.when = when

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        api = scope["type"] == "http" and scope["method"] == "POST"
        api = api and scope["path"].startswith(_API)
        if api and _compressed(self.when(scope), scope):
            send = Gzipped(send)
        await self.app(scope, receive, send)


def _compressed(when: GzipWhen, scope: Scope) -> bool:
    if when != "accepted":
        return when == "always"
    accept = b", ".join(v for k, v in scope["headers"] if k.lower() == b"accept-encoding")
    return accepts_gzip(accept.decode("latin-1"))
