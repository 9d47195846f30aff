"""Nearest cached questions: the only module that imports faiss.

One exact inner-product index per semantic scope (normalised vectors: inner product = cosine).
Scopes are small (one system prompt and one model), so a flat index answers in microseconds to
a fraction of a millisecond and needs no training or rebuild; faiss is pinned to one thread
because its OpenMP pool fights the embedder and the event loop for two cores. faiss is imported
when a first index is made: a proxy without the semantic extra never makes one.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]


@functools.cache
def _faiss() -> Any:
    import faiss

    faiss.omp_set_num_threads(1)
    return faiss


class VectorIndex:
    def __init__(self, dimension: int) -> None:
        faiss = _faiss()
        self._index = faiss.IndexIDMap2(faiss.IndexFlatIP(dimension))

    def __len__(self) -> int:
        return int(self._index.ntotal)

    def add(self, ident: int, vector: Vector) -> None:
        self._index.add_with_ids(vector.reshape(1, -1), np.array([ident], dtype=np.int64))

    def remove(self, ident: int) -> None:
        self._index.remove_ids(np.array([ident], dtype=np.int64))

    def search(self, vector: Vector, k: int) -> list[tuple[int, float]]:
        """The k nearest (id, similarity), most similar first."""
        if not len(self):
            return []
        scores, ids = self._index.search(vector.reshape(1, -1), min(k, len(self)))
        return [(int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True) if i >= 0]
