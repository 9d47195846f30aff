"""Nearest cached questions: the only module that imports faiss.

One index per semantic context (scope, parameters and earlier messages), whose cost per lookup
and per eviction must stay flat however many questions it holds: a flat faiss search is linear
(measured, 100,000 vectors: 14 ms a lookup here) and so was `remove_ids` on every eviction.

- Small (up to `EXACT_UP_TO` vectors), it is exact: a matrix searched by one matrix-vector
  product (~0.1 ms), a vector removed by moving the last one into its row.
- Larger, it is approximate: an inverted file (faiss IVF) that scans the `probes` lists nearest
  to the question, ~6% of the vectors (measured, 100,000: ~0.3 ms), whose hash-table directory
  removes a vector in constant time. A near-duplicate lies in its neighbour's list or one next
  to it; one the scan misses is a cache miss, never a wrong answer.

Building the inverted file (k-means over the vectors, then adding them) takes seconds, so it is
never done on the event loop: `build_due` hands out a snapshot, `Build.run` builds from it in a
worker thread (faiss releases the GIL), and `install` swaps it in after replaying what changed
meanwhile; until then the old structure answers. It is built once the exact matrix outgrows
`EXACT_UP_TO`, and again, with more lists, once it holds `REBUILD_GROWTH` times the vectors it
was built from. faiss is pinned to one thread: its OpenMP pool fights the embedder and the event
loop for two cores. That setting is OpenMP's per calling thread, so every thread that calls
faiss makes it (`_faiss`): set once, by the build's worker thread, it left the event loop's
searches and adds on two threads, whose idle OpenMP worker then spun on the other core after
each one (a profile at 100,000 entries: the second most busy thread of the proxy) and made the
loop wait at OpenMP's barrier for a core. faiss is imported when a first index is made: a proxy
without the semantic extra never makes one.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]
Matrix = npt.NDArray[np.float32]
Ids = npt.NDArray[np.int64]

EXACT_UP_TO = 4096
REBUILD_GROWTH = 16
MAX_LISTS = 256  # 100,000 vectors: lists of ~400, 16 probed (k-means for more takes minutes)
TRAINING_ITERATIONS = 10
POINTS_PER_LIST = 39  # faiss's minimum training points per centroid


class _OneThreadEach(threading.local):
    """Whether the calling thread has pinned OpenMP to one thread (a per-thread setting)."""

    pinned = False


_THREADS = _OneThreadEach()


def _faiss() -> Any:
    """faiss, OpenMP pinned to one thread for the calling thread: call it before any faiss call."""
    faiss = _imported()
    if not _THREADS.pinned:
        faiss.omp_set_num_threads(1)
        _THREADS.pinned = True
    return faiss


@functools.cache
def _imported() -> Any:
    import faiss

    return faiss


def lists_for(vectors: int) -> int:
    """Inverted lists for an index built from `vectors`: a power of two that k-means can train
    from that many points, at most MAX_LISTS."""
    fit = max(vectors // POINTS_PER_LIST, 1)
    return int(min(MAX_LISTS, max(16, 1 << (fit.bit_length() - 1))))


def probes_for(lists: int) -> int:
    return max(8, lists // 16)


class ExactVectors:
    """Vectors in the rows of one matrix, searched exactly."""

    def __init__(self, dimension: int) -> None:
        self._matrix: Matrix = np.empty((64, dimension), dtype=np.float32)
        self._ids: Ids = np.empty(64, dtype=np.int64)
        self._rows: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._rows)

    def add(self, ident: int, vector: Vector) -> None:
        if ident in self._rows:
            self.remove(ident)
        row = len(self._rows)
        if row == len(self._ids):
            self._matrix = np.concatenate([self._matrix, np.empty_like(self._matrix)])
            self._ids = np.concatenate([self._ids, np.empty_like(self._ids)])
        self._matrix[row] = vector
        self._ids[row] = ident
        self._rows[ident] = row

    def remove(self, ident: int) -> None:
        row = self._rows.pop(ident, None)
        if row is None:
            return
        last = len(self._rows)  # the last row, now that one is gone
        if row != last:
            moved = int(self._ids[last])
            self._matrix[row] = self._matrix[last]
            self._ids[row] = moved
            self._rows[moved] = row

    def search(self, vector: Vector, k: int) -> list[tuple[int, float]]:
        count = len(self._rows)
        if not count:
            return []
        scores = self._matrix[:count] @ vector
        k = min(k, count)
        best = np.argpartition(-scores, k - 1)[:k] if k < count else np.arange(count)
        best = best[np.argsort(-scores[best], kind="stable")]
        return [(int(self._ids[i]), float(scores[i])) for i in best]

    def snapshot(self) -> tuple[Ids, Matrix]:
        count = len(self._rows)
        return self._ids[:count].copy(), self._matrix[:count].copy()


class InvertedFile:
    """faiss IVF (inner product) with a hash-table directory: constant-time removal."""

    def __init__(self, index: Any, built_from: int) -> None:
        self._index = index
        self.built_from = built_from
        self._ids: set[int] = set()

    @classmethod
    def trained(cls, vectors: Matrix) -> InvertedFile:
        faiss = _faiss()
        dimension, lists = vectors.shape[1], lists_for(len(vectors))
        index = faiss.IndexIVFFlat(
            faiss.IndexFlatIP(dimension), dimension, lists, faiss.METRIC_INNER_PRODUCT
        )
        index.cp.niter = TRAINING_ITERATIONS
        index.cp.max_points_per_centroid = POINTS_PER_LIST * 4  # a sample, not all of them
        index.cp.seed = 1234  # the same vectors make the same lists
        index.train(vectors)
        index.set_direct_map_type(faiss.DirectMap.Hashtable)
        index.nprobe = probes_for(lists)
        return cls(index, len(vectors))

    def __len__(self) -> int:
        return len(self._ids)

    def add_all(self, ids: Ids, vectors: Matrix) -> None:
        if len(ids):
            _faiss()
            self._index.add_with_ids(vectors, ids)
            self._ids.update(int(i) for i in ids)

    def add(self, ident: int, vector: Vector) -> None:
        self.remove(ident)
        _faiss()
        self._index.add_with_ids(vector.reshape(1, -1), np.array([ident], dtype=np.int64))
        self._ids.add(ident)

    def remove(self, ident: int) -> None:
        if ident not in self._ids:
            return
        self._ids.discard(ident)
        ids = np.array([ident], dtype=np.int64)
        faiss = _faiss()
        self._index.remove_ids(faiss.IDSelectorArray(1, faiss.swig_ptr(ids)))

    def search(self, vector: Vector, k: int) -> list[tuple[int, float]]:
        if not self._ids:
            return []
        _faiss()
        scores, ids = self._index.search(vector.reshape(1, -1), min(k, len(self._ids)))
        return [(int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True) if i >= 0]

    def snapshot(self) -> tuple[Ids, Matrix]:
        ids = np.fromiter(self._ids, dtype=np.int64, count=len(self._ids))
        vectors = np.empty((len(ids), self._index.d), dtype=np.float32)
        for row, ident in enumerate(ids):  # reconstruct_batch is the same loop, in C++
            vectors[row] = self._index.reconstruct(int(ident))
        return ids, vectors


@dataclass(frozen=True)
class Build:
    """What an inverted file is built from: a snapshot, private to the thread that builds."""

    ids: Ids
    vectors: Matrix

    def run(self) -> InvertedFile:
        built = InvertedFile.trained(self.vectors)
        built.add_all(self.ids, self.vectors)
        return built


class VectorIndex:
    """Exact while small, an inverted file once large; built off the loop (`build_due`)."""

    def __init__(self, dimension: int, exact_up_to: int = EXACT_UP_TO) -> None:
        self.dimension = dimension
        self.exact_up_to = exact_up_to
        self._store: ExactVectors | InvertedFile = ExactVectors(dimension)
        # what changed since a build's snapshot was taken (None: no build running), in order
        self._changes: list[tuple[int, Vector | None]] | None = None

    def __len__(self) -> int:
        return len(self._store)

    @property
    def approximate(self) -> bool:
        return isinstance(self._store, InvertedFile)

    @property
    def built_from(self) -> int | None:
        """How many vectors the inverted file was built from (None while exact)."""
        return self._store.built_from if isinstance(self._store, InvertedFile) else None

    def add(self, ident: int, vector: Vector) -> None:
        self._store.add(ident, vector)
        if self._changes is not None:
            self._changes.append((ident, vector))

    def remove(self, ident: int) -> None:
        self._store.remove(ident)
        if self._changes is not None:
            self._changes.append((ident, None))

    def search(self, vector: Vector, k: int) -> list[tuple[int, float]]:
        """The k nearest (id, similarity), most similar first (nearly, once approximate)."""
        return self._store.search(vector, k)

    def build_due(self) -> Build | None:
        """A snapshot to build an inverted file from, when one is due and none is running;
        from then on changes are logged until `install` or `abandon`."""
        if self._changes is not None or not self._due():
            return None
        self._changes = []
        return Build(*self._store.snapshot())

    def install(self, built: InvertedFile) -> None:
        """Swap in a built inverted file, with what changed since its snapshot."""
        changes, self._changes = self._changes or [], None
        for ident, vector in changes:
            if vector is None:  # removed
                built.remove(ident)
            else:
                built.add(ident, vector)
        self._store = built

    def abandon(self) -> None:
        """The build failed: keep the current structure (and try again when next due)."""
        self._changes = None

    def _due(self) -> bool:
        store = self._store
        if isinstance(store, ExactVectors):
            return len(store) > self.exact_up_to
        grown = len(store) >= REBUILD_GROWTH * store.built_from
        return grown and lists_for(len(store)) > lists_for(store.built_from)
