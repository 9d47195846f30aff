"""The ASGI response that runs a sequence and sends its answer, whole or streamed.

It watches the connection while it works: when the client goes away, the response task is
cancelled wherever it is waiting (an injected delay, a cold load, the queue, between tokens) and
the sequence is aborted, so the engine frees its slot and KV blocks at the next step, as vLLM
does. Starlette's StreamingResponse only notices a disconnect on its next write, which is too late
for a request that hangs before its first token.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.types import Receive, Scope, Send

from proxy.errors import APIError
from proxy.http.disconnect import DisconnectWatch
from proxy.sim.engine import Sequence
from proxy.sim.formats import WireFormat
from proxy.sim.requests import GenerationRequest
from proxy.sim.simulator import Simulator


@dataclass
class SequenceResponse:
    sim: Simulator
    request: GenerationRequest
    format: WireFormat
    headers: list[tuple[bytes, bytes]]
    # vLLM sends a stream's headers as soon as it accepts the request; Ollama and hosted APIs
    # with the first chunk.
    headers_first: bool = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with DisconnectWatch(receive) as watch:
            self._watch = watch
            await self._respond(send)
        if watch.disconnected:
            self.sim.disconnects += 1

    async def _respond(self, send: Send) -> None:
        try:
            engine, seq = await self.sim.start(self.request, self.request.stream)
        except APIError as error:
            await self._send_error(send, error)
            return
        try:
            if self.request.stream:
                await self._stream(send, seq)
            else:
                await self._whole(send, seq)
        finally:
            engine.abort(seq)  # a no-op for a sequence that finished
            self.sim.host.release(self.request.model)

    async def _whole(self, send: Send, seq: Sequence) -> None:
        await seq.done.wait()
        body = self.format.whole(seq)
        drop = self.sim.faults.drop_after_chunks
        await self._start(send, self.format.media_type(False), len(body))
        if drop is not None:
            # The connection dies halfway through the body.
            await send(
                {"type": "http.response.body", "body": body[: len(body) // 2], "more_body": True}
            )
            return
        self._watch.finish()
        await send({"type": "http.response.body", "body": body})

    async def _stream(self, send: Send, seq: Sequence) -> None:
        if not self.headers_first:
            await seq.progress.wait()
        await self._start(send, self.format.media_type(True), None)
        sent = 0
        pieces = 0
        drop = self.sim.faults.drop_after_chunks
        buffer = self.format.first()
        while True:
            seq.progress.clear()
            tokens = seq.output.tokens
            while sent < seq.generated:
                if drop is not None and pieces >= drop:
                    await self._body(send, buffer)
                    return  # uvicorn closes a response that was never completed
                final = seq.ended and sent + 1 == seq.generated
                buffer += self.format.piece(tokens[sent], seq.finish_reason if final else None)
                sent += 1
                pieces += 1
            if seq.ended:
                break
            if sent:  # vLLM sends the role chunk with the first token, not before prefill
                await self._body(send, buffer)
                buffer = b""
            await seq.progress.wait()
        self._watch.finish()
        await send({"type": "http.response.body", "body": buffer + self.format.last(seq)})

    async def _start(self, send: Send, media_type: str, length: int | None) -> None:
        headers = [(b"content-type", media_type.encode()), *self.headers]
        if length is not None:
            headers.append((b"content-length", str(length).encode()))
        await send({"type": "http.response.start", "status": 200, "headers": headers})

    @staticmethod
    async def _body(send: Send, data: bytes) -> None:
        if data:
            await send({"type": "http.response.body", "body": data, "more_body": True})

    async def _send_error(self, send: Send, error: APIError) -> None:
        body = self.format.error(error, streaming=False)
        headers = [(b"content-type", b"application/json"), *self.headers]
        headers += [(k.lower().encode(), v.encode()) for k, v in error.headers.items()]
        headers.append((b"content-length", str(len(body)).encode()))
        self._watch.finish()
        await send({"type": "http.response.start", "status": error.status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
