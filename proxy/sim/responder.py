"""The ASGI response that runs a request's sequences and sends its answer, whole or streamed.

A request has one sequence, or one per prompt for a batched completions request: a stream then
interleaves its choices' chunks in the order the engine produced the tokens.

It watches the connection while it works: when the client goes away, the response task is
cancelled wherever it is waiting (an injected delay, a cold load, the queue, between tokens) and
the sequence is aborted, so the engine frees its slot and KV blocks at the next step, as vLLM
does. Starlette's StreamingResponse only notices a disconnect on its next write, which is too late
for a request that hangs before its first token.
"""

from __future__ import annotations

from collections.abc import Iterator
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
    # One per choice: a batch's requests differ only in their prompts.
    requests: tuple[GenerationRequest, ...]
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
        stream = self.requests[0].stream
        try:
            engine, seqs = await self.sim.start(self.requests, stream)
        except APIError as error:
            await self._send_error(send, error)
            return
        try:
            if stream:
                await self._stream(send, seqs)
            else:
                await self._whole(send, seqs)
        finally:
            for seq in seqs:
                engine.abort(seq)  # a no-op for a sequence that finished
            self.sim.host.release(self.requests[0].model)

    async def _whole(self, send: Send, seqs: tuple[Sequence, ...]) -> None:
        for seq in seqs:
            await seq.done.wait()
        body = self.format.whole(seqs)
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

    async def _stream(self, send: Send, seqs: tuple[Sequence, ...]) -> None:
        progress = seqs[0].progress  # shared by all of them (Simulator.sequences)
        if not self.headers_first:
            await progress.wait()
        await self._start(send, self.format.media_type(True), None)
        sent = [0] * len(seqs)
        closed = [False] * len(seqs)
        pieces = 0
        drop = self.sim.faults.drop_after_chunks
        buffer = self.format.first()
        while True:
            progress.clear()
            for index in in_step_order(seqs, sent):
                if drop is not None and pieces >= drop:
                    await self._body(send, buffer)
                    return  # uvicorn closes a response that was never completed
                buffer += self.format.piece(seqs[index], sent[index], index)
                sent[index] += 1
                pieces += 1
            buffer += self._close_ended(seqs, closed)
            if all(closed):
                break
            if pieces:  # vLLM sends the role chunk with the first token, not before prefill
                await self._body(send, buffer)
                buffer = b""
            await progress.wait()
        self._watch.finish()
        await send({"type": "http.response.body", "body": buffer + self.format.last(seqs)})

    def _close_ended(self, seqs: tuple[Sequence, ...], closed: list[bool]) -> bytes:
        """Each newly finished choice's closing, once (marked in `closed`)."""
        out = b""
        for index, seq in enumerate(seqs):
            if seq.ended and not closed[index]:
                out += self.format.end(seq, index)
                closed[index] = True
        return out

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


def in_step_order(seqs: tuple[Sequence, ...], sent: list[int]) -> Iterator[int]:
    """Whose unsent token goes out next: one per choice in index order, round after round.

    A scheduler step emits one token per running sequence, so choices decoding side by side
    come out in the order the engine made them, even when several steps passed since the
    stream last looked. The caller counts each index it is given in `sent`.
    """
    while True:
        ready = [index for index, seq in enumerate(seqs) if sent[index] < seq.generated]
        if not ready:
            return
        yield from ready
