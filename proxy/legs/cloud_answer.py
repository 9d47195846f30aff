"""What a cloud target hands back (the Answer protocol): a whole answer rendered as OpenAI
JSON, or litellm's stream relayed as SSE chunk by chunk, with its bill settled exactly once
however the stream ends."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from proxy.legs.cloud_errors import reported
from proxy.legs.cloud_params import dropped_header


@dataclass
class StreamBill:
    """What a cloud stream cost, settled exactly once however it ends: from the provider's usage
    when it came, else from what passed (a client that leaves early, a stream that breaks), so
    no way of ending a stream escapes its charge."""

    price: Callable[[int, int], float]  # prompt, completion tokens -> USD
    charge: Callable[[float], None]
    prompt_estimate: int
    usage: Any = None
    pieces: int = 0  # chunks that carried text
    chars: int = 0
    settled: bool = False

    def saw(self, chunk: Any) -> None:
        if getattr(chunk, "usage", None) is not None:
            self.usage = chunk.usage
            self.settle()  # now, before the client sees the stream end and asks again
        for choice in getattr(chunk, "choices", None) or ():
            delta = getattr(choice, "delta", None)
            text = getattr(delta, "content", None) or getattr(choice, "text", None)
            if text:
                self.pieces += 1
                self.chars += len(text)

    def settle(self) -> None:
        if self.settled:
            return
        self.settled = True
        if self.usage is not None:
            prompt = int(getattr(self.usage, "prompt_tokens", 0) or 0)
            completion = int(getattr(self.usage, "completion_tokens", 0) or 0)
        else:  # at least one token a piece, and about four characters a token
            prompt, completion = self.prompt_estimate, max(self.pieces, -(-self.chars // 4))
        self.charge(self.price(prompt, completion))


@dataclass
class CloudAnswer:
    target: str
    stream: bool
    body: bytes = b""
    request_id: str = ""  # for the log, should the provider fail mid-stream
    source: Any = None  # litellm's stream
    cost: float = 0.0
    usage: dict[str, Any] = field(default_factory=dict)
    bill: StreamBill | None = None  # a stream's, settled when it ends
    show_usage: bool = True  # False: the client did not ask for the usage chunk
    dropped: tuple[str, ...] = ()  # body fields left behind (proxy/legs/cloud_params.py)

    @property
    def status(self) -> int:
        return 200

    def headers(self) -> list[tuple[bytes, bytes]]:
        kind = b"text/event-stream" if self.stream else b"application/json"
        headers = [(b"content-type", kind)]
        if self.dropped:
            headers.append((b"x-overspill-dropped", dropped_header(self.dropped)))
        return headers

    async def read(self) -> bytes:
        return self.body

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self.source:
                if self.bill is not None:
                    self.bill.saw(chunk)
                usage = getattr(chunk, "usage", None)
                if usage is not None and not self.show_usage:
                    if not getattr(chunk, "choices", None) or _empty_choices(chunk):
                        continue  # the usage chunk the client did not ask for
                    chunk = chunk.model_copy(update={"usage": None})
                elif usage is not None and _empty_choices(chunk):
                    # litellm's usage chunk carries a choice with an empty delta; OpenAI's has
                    # none, and clients that read choices[0] of the last chunk expect that
                    chunk = chunk.model_copy(update={"choices": []})
                yield b"data: " + chunk.model_dump_json(exclude_none=True).encode() + b"\n\n"
            yield b"data: [DONE]\n\n"
        except Exception as exc:
            raise reported(self.target, exc, self.request_id) from exc
        finally:
            source = self.source
            self.close()
            await closed(source)

    def close(self) -> None:
        if self.bill is not None:
            self.bill.settle()
        if self.stream:
            self.source = None


def _empty_choices(chunk: Any) -> bool:
    """The chunk has choices, and none of them says anything."""
    choices = getattr(chunk, "choices", None) or ()
    return bool(choices) and all(_says_nothing(choice) for choice in choices)


def _says_nothing(choice: Any) -> bool:
    """No finish reason, and a delta with no field set."""
    delta = getattr(choice, "delta", None)
    empty = delta is None or not delta.model_dump(exclude_none=True)
    return empty and not getattr(choice, "finish_reason", None)


async def closed(source: Any) -> None:
    """Close litellm's stream, and with it the connection: the provider stops generating (and
    billing) as soon as the client is gone, not at the end of the answer."""
    closer = getattr(source, "aclose", None)
    if closer is not None:
        with contextlib.suppress(Exception):
            await closer()
