"""A cloud answer relayed as the provider sent it (a target that speaks OpenAI's wire format):
bytes in, bytes out, as the local leg relays an engine's, with the bill read off the answer.

Nothing is built per chunk. A stream is cut into its SSE events on blank lines; only an event
that carries the usage (`"usage": {`, once, near the end: the call always asks for it) is
parsed, to price the answer and, when the client did not ask for usage, to be left out. The
bill is settled exactly once however the stream ends: from the usage when it came; else, for
an answer that ended without usage the proxy could read, the most the call could cost; else (a
client that left, a stream that broke) at least a token per event that passed. A stream that is
not one (no event stream, an event too long) is unreadable: billed at the most.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from proxy.errors import UpstreamUnreadable
from proxy.legs.answer import Answer
from proxy.legs.cloud_params import dropped_header
from proxy.legs.sse import EventSplitter

_USAGE = re.compile(rb'"usage"\s*:\s*\{')
_EVENT_END = b"\n\n"


def usage_of(payload: Any) -> tuple[int, int] | None:
    """(prompt, completion) tokens of an answer or chunk that reports them."""
    usage = payload.get("usage") if isinstance(payload, dict) else None
    if not isinstance(usage, dict):
        return None
    return int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)


@dataclass
class WireBill:
    """A wire answer's cost, charged once: `price(prompt, completion)` in USD. An answer the
    provider finished without usage the proxy could read (none sent, or not readable) is
    charged `worst()`, the most it could cost: usage that is hidden or garbled never makes an
    answer cheaper to the tenant than usage shown."""

    price: Callable[[int, int], float]
    charge: Callable[[float], None]
    prompt_estimate: int
    worst: Callable[[], float] | None = None  # None: charged for what passed
    tokens: tuple[int, int] | None = None
    events: int = 0  # data events that passed: at least a token each
    ended: bool = False  # the provider's answer arrived whole
    settled: bool = False

    def settle(self) -> None:
        if self.settled:
            return
        self.settled = True
        if self.tokens is None and self.ended and self.worst is not None:
            self.charge(self.worst())
            return
        prompt, completion = self.tokens or (self.prompt_estimate, self.events)
        self.charge(self.price(prompt, completion))


@dataclass
class WireAnswer:
    """The provider's answer (an engine client's Answer) with the bill and the client's usage
    choice applied; the rest passes untouched."""

    source: Answer
    bill: WireBill
    stream: bool
    show_usage: bool = True  # False: the client did not ask for the usage chunk
    dropped: tuple[str, ...] = ()  # body fields left behind (proxy/legs/cloud_params.py)
    usage: dict[str, Any] = field(default_factory=dict)  # a whole answer's, once read

    @property
    def status(self) -> int:
        return self.source.status

    def headers(self) -> list[tuple[bytes, bytes]]:
        headers = self.source.headers()
        if self.dropped:
            headers.append((b"x-overspill-dropped", dropped_header(self.dropped)))
        return headers

    async def read(self) -> bytes:
        body = await self.source.read()
        try:
            payload = orjson.loads(body)
        except orjson.JSONDecodeError:
            payload = None
        self.bill.tokens = usage_of(payload)
        if self.bill.tokens is not None and isinstance(payload, dict):
            self.usage = payload["usage"]
        self.bill.ended = True
        self.bill.settle()
        return body

    async def chunks(self) -> AsyncIterator[bytes]:
        splitter = EventSplitter()  # an event still arriving is held until its end
        try:
            async for chunk in self.source.chunks():
                whole = splitter.feed(chunk)
                if splitter.dropped:  # an event of megabytes: not an answer to relay
                    raise UpstreamUnreadable(
                        "the cloud target sent an event too long to relay",
                        detail=f"over {splitter.limit} bytes",
                    )
                if whole and (out := self._passed(whole)):
                    yield out
            if held := splitter.rest():
                yield held
            self.bill.ended = True  # whole: usage that never came is billed at the most
        except UpstreamUnreadable:
            # it answered (and bills it), in a form nobody can read: the most it could cost
            self.bill.ended = True
            raise
        finally:
            self.close()

    def _passed(self, events: bytes) -> bytes:
        """Complete events as they go to the client: counted, the usage read (and left out
        when unasked)."""
        self.bill.events += events.count(b"data: {")
        if not self.show_usage:  # OpenAI writes "usage": null in every chunk once it is asked
            events = events.replace(b',"usage":null', b"")
        if _USAGE.search(events) is None:
            return events
        kept = [event for event in events.split(_EVENT_END) if self._keeps(event)]
        return _EVENT_END.join(kept)

    def _keeps(self, event: bytes) -> bool:
        if _USAGE.search(event) is None:
            return True
        data = event.partition(b"data:")[2].strip()
        try:
            payload = orjson.loads(data)
        except orjson.JSONDecodeError:
            return True
        self.bill.tokens = usage_of(payload)
        self.bill.settle()  # now, before the client sees the stream end and asks again
        # the usage-only chunk the client did not ask for is left out
        return self.show_usage or bool(payload.get("choices"))

    def close(self) -> None:
        self.bill.settle()
        self.source.close()
