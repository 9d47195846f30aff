"""Sentence embeddings for the semantic cache: which encoder to load (cache/encoders.py), how
far the int8 one strays from its referee, and `Embedder`, the async front.

The export runs in a child process (`python -m cache.onnx_model build DIR`), so even a first
start leaves torch out of the server. int8 moves a similarity by a few hundredths, enough to flip
a question near the threshold, so the cache has the fp32 model settle those few (`referee_kind`,
cache.referee.Referee): the fast path then serves exactly the reference's hits. How far int8 strays
is measured by the export, on the machine it runs on, and again on a machine with other int8
kernels that serves a model made elsewhere (`measured_shift`, cache/shift.py); the referee's margin
is sized from that.

`Embedder` is the async front. One worker thread owns the encoder and hands every text waiting at
that moment to one encode call, so 64 concurrent lookups cost a handful of batches, not 64.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cache.calibration_pairs import PAIRS as CALIBRATION
from cache.encoders import (
    MODEL_FILE,
    ONNX_DIR,
    REFERENCE_FILE,
    TOKENIZER_FILE,
    EmbedderError,
    Encoder,
    EncoderKind,
    Shift,
    TorchEncoder,
    Vectors,
    log,
    one_torch_thread,
    onnx_encoder,
    source_model,
)
from cache.onnx_model import complete, measure_shift, read_shift, rebuild
from cache.shift import cpu_signature, shift_here


class EmbedderClosed(EmbedderError):
    """embed() after close()."""


def load_encoder(kind: EncoderKind, home: Path) -> Encoder:
    """Blocks for seconds (the first ONNX load exports the model): call it off the loop."""
    loaders: dict[str, Callable[[Path], Encoder]] = {
        "onnx": lambda home: _load_onnx(home, MODEL_FILE),
        "onnx-fp32": lambda home: _load_onnx(home, REFERENCE_FILE),
        "torch": _load_torch,
    }
    return loaders[kind](home)


def referee_kind(kind: EncoderKind) -> EncoderKind | None:
    """The encoder that settles similarities `kind` cannot place exactly, if it needs one."""
    return "onnx-fp32" if kind == "onnx" else None


def measured_shift(kind: EncoderKind, home: Path) -> Shift | None:
    """How far `kind` strays from its referee on this CPU: as the export measured it, or, for a
    model made on another CPU, as measured here (cache/shift.py: seconds, once); None for an
    encoder that needs no referee. Call it after load_encoder, which makes the model."""
    if referee_kind(kind) is None:
        return None
    folder = home / "models" / ONNX_DIR

    def measure() -> Shift:
        tokenizer = folder / TOKENIZER_FILE
        fast = onnx_encoder(folder / MODEL_FILE, tokenizer)
        reference = onnx_encoder(folder / REFERENCE_FILE, tokenizer, batched=True)
        return measure_shift(fast, reference, CALIBRATION)

    return shift_here(read_shift(folder), folder, cpu_signature(), measure)


def _load_torch(home: Path) -> Encoder:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from sentence_transformers import SentenceTransformer

    one_torch_thread(torch)
    return TorchEncoder(SentenceTransformer(str(source_model()), device="cpu"))


def _load_onnx(home: Path, file: str) -> Encoder:
    folder = home / "models" / ONNX_DIR
    if not complete(folder):
        rebuild(folder)
    model, tokenizer = folder / file, folder / TOKENIZER_FILE
    batched = file == REFERENCE_FILE  # fp32: a vector does not depend on its batch-mates
    try:
        return onnx_encoder(model, tokenizer, batched)
    except Exception as exc:  # a manifest over a damaged model: rebuilt once, not fatal
        log.warning("embedder: cached ONNX model unusable (%s); rebuilding", exc)
        rebuild(folder, damaged=True)
        return onnx_encoder(model, tokenizer, batched)


# --- the async front ------------------------------------------------------------------------


@dataclass(eq=False)
class _Job:
    texts: list[str]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Vectors]


class _Unavailable:
    """Stands in for an encoder that failed to load: every batch fails with the reason."""

    dimension = 0

    def __init__(self, cause: Exception) -> None:
        self._cause = cause

    def encode(self, texts: Sequence[str]) -> Vectors:
        raise EmbedderError(f"the embedding model failed to load: {self._cause}") from self._cause


class Embedder:
    """Micro-batching in one worker thread, which also builds the encoder (seconds: never on
    the event loop). A failed batch fails only its own callers."""

    def __init__(self, encoder_factory: Callable[[], Encoder], max_batch: int = 64) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, not {max_batch}")
        self._factory = encoder_factory
        self._max_batch = max_batch
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()  # no job can be queued behind close()'s stop mark
        self._closed = False
        self.batches = 0  # encode calls made
        self.items = 0  # texts encoded
        self._thread = threading.Thread(target=self._serve, name="embedder", daemon=True)
        self._thread.start()

    async def embed(self, text: str) -> Vectors:
        """One normalised float32 vector, shape (dimension,)."""
        vectors = await self._submit([text])
        vector: Vectors = vectors[0]
        return vector

    async def embed_many(self, texts: Sequence[str]) -> Vectors:
        size = self._max_batch
        chunks = [list(texts[i : i + size]) for i in range(0, len(texts), size)] or [[]]
        parts = await asyncio.gather(*(self._submit(chunk) for chunk in chunks))
        return np.concatenate(parts)

    def close(self, wait: bool = True) -> None:
        """Serves what is already queued, then stops the thread; idempotent. With `wait`, it
        waits for that, and for a model still loading: from async code, call it through
        asyncio.to_thread. Without, the (daemon) thread finishes on its own or with the process."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._jobs.put(None)
        if wait:
            self._thread.join()

    def _submit(self, texts: list[str]) -> asyncio.Future[Vectors]:
        loop = asyncio.get_running_loop()
        job = _Job(texts, loop, loop.create_future())
        with self._lock:
            if self._closed:
                raise EmbedderClosed("the embedder is closed")
            self._jobs.put(job)
        return job.future

    # the worker thread

    def _serve(self) -> None:
        encoder = self._load()
        pending: deque[_Job] = deque()
        running = True
        while running or pending:
            if not pending:
                job = self._jobs.get()
                if job is None:
                    return
                pending.append(job)
            running = self._drain(pending) and running
            batch = self._take(pending)
            if batch:
                self._run(encoder, batch)

    def _load(self) -> Encoder:
        try:
            return self._factory()
        except Exception as exc:
            log.exception("embedder: the encoder failed to load")
            return _Unavailable(exc)

    def _drain(self, pending: deque[_Job]) -> bool:
        """Move every queued job to `pending`; False once close()'s stop mark is seen."""
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                return True
            if job is None:
                return False
            pending.append(job)

    def _take(self, pending: deque[_Job]) -> list[_Job]:
        """Up to max_batch texts, first come first served. Callers that gave up (cancelled) are
        dropped: done() can only have been set by a cancel, the worker being the sole resolver."""
        batch: list[_Job] = []
        count = 0
        while pending and (not batch or count + len(pending[0].texts) <= self._max_batch):
            job = pending.popleft()
            if not job.future.done():
                batch.append(job)
                count += len(job.texts)
        return batch

    def _run(self, encoder: Encoder, batch: list[_Job]) -> None:
        texts = [text for job in batch for text in job.texts]
        self.batches += 1
        self.items += len(texts)
        try:
            vectors = encoder.encode(texts)
            if vectors.shape[0] != len(texts):
                raise EmbedderError(f"encoder returned {vectors.shape[0]} rows for {len(texts)}")
        except Exception as exc:
            for job in batch:
                _settle(job, _fail, exc)
            return
        start = 0
        for job in batch:
            _settle(job, _deliver, vectors[start : start + len(job.texts)].copy())
            start += len(job.texts)


def _settle(job: _Job, action: Callable[[asyncio.Future[Vectors], Any], None], value: Any) -> None:
    with contextlib.suppress(RuntimeError):  # the caller's loop is closed: nobody waits any more
        job.loop.call_soon_threadsafe(action, job.future, value)


def _deliver(future: asyncio.Future[Vectors], vectors: Vectors) -> None:
    if not future.done():  # the caller may have been cancelled meanwhile
        future.set_result(vectors)


def _fail(future: asyncio.Future[Vectors], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)
