"""The nearest-question index: exact while small, an inverted file once large, built from a
snapshot off the loop with what changed meanwhile replayed."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from cache.index import (
    MAX_LISTS,
    Build,
    ExactVectors,
    InvertedFile,
    VectorIndex,
    lists_for,
)

DIMENSION = 32


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)


def clustered(count: int, seed: int = 0) -> np.ndarray:
    """Vectors around 40 centres: the structure sentence embeddings have, and IVF relies on."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((40, DIMENSION))
    return unit(centres[rng.integers(0, 40, count)] + 0.3 * rng.standard_normal((count, DIMENSION)))


def exact_nearest(vectors: dict[int, np.ndarray], query: np.ndarray) -> int:
    return max(vectors, key=lambda ident: float(vectors[ident] @ query))


def test_the_exact_stage_finds_the_nearest_most_similar_first() -> None:
    vectors = clustered(300)
    index = VectorIndex(DIMENSION)
    for ident, vector in enumerate(vectors, start=1):
        index.add(ident, vector)
    query = unit(vectors[17] + 0.01)
    found = index.search(query, 4)
    scores = [score for _, score in found]
    assert found[0][0] == 18
    assert scores == sorted(scores, reverse=True)
    assert found[0][1] == pytest.approx(float(vectors[17] @ query), abs=1e-6)


def test_removing_moves_the_last_row_and_keeps_every_other_vector_findable() -> None:
    vectors = clustered(100)
    exact = ExactVectors(DIMENSION)
    for ident, vector in enumerate(vectors):
        exact.add(ident, vector)
    for gone in (0, 50, 99, 98):
        exact.remove(gone)
    exact.remove(1000)  # absent: nothing happens
    assert len(exact) == 96
    for ident, vector in enumerate(vectors):
        nearest = exact.search(vector, 1)
        assert (nearest[0][0] == ident) == (ident not in (0, 50, 99, 98))


def test_adding_an_id_again_replaces_its_vector() -> None:
    vectors = clustered(3)
    exact = ExactVectors(DIMENSION)
    exact.add(7, vectors[0])
    exact.add(7, vectors[1])
    assert len(exact) == 1
    assert exact.search(vectors[1], 1)[0] == (7, pytest.approx(1.0, abs=1e-6))


def test_an_inverted_file_finds_each_stored_vector_and_forgets_a_removed_one() -> None:
    vectors = clustered(2000)
    ids = np.arange(1, 2001, dtype=np.int64)
    built = Build(ids, vectors).run()
    assert len(built) == 2000
    for row in (0, 999, 1999):  # a stored vector lies in the list its own centroid heads
        assert built.search(vectors[row], 1)[0][0] == row + 1
    built.remove(1000)
    built.remove(1000)  # twice: nothing more happens
    assert len(built) == 1999
    assert all(ident != 1000 for ident, _ in built.search(vectors[999], 4))


def test_a_small_index_becomes_an_inverted_file_with_changes_made_during_the_build() -> None:
    vectors = clustered(700)
    index = VectorIndex(DIMENSION, exact_up_to=500)
    for ident in range(1, 501):
        index.add(ident, vectors[ident - 1])
    assert index.build_due() is None  # not more than exact_up_to yet
    index.add(501, vectors[500])
    build = index.build_due()
    assert build is not None
    assert len(build.ids) == 501
    assert index.build_due() is None  # one build at a time
    # while it builds (in a thread in the cache), the exact stage answers and changes are kept
    for ident in range(502, 701):
        index.add(ident, vectors[ident - 1])
    index.remove(3)
    index.remove(600)
    index.install(build.run())
    assert index.approximate
    assert len(index) == 700 - 2
    assert index.search(vectors[649], 1)[0][0] == 650  # added during the build
    for gone in (3, 600):
        assert all(ident != gone for ident, _ in index.search(vectors[gone - 1], 8))


def test_near_duplicates_are_found_by_the_inverted_file_as_by_an_exact_search() -> None:
    """Approximate, but not for what a cache hit needs: a question very close to a stored one
    (cosine >= 0.9 here) finds it. A miss would cost an upstream call, never a wrong answer."""
    vectors = clustered(3000, seed=1)
    built = Build(np.arange(3000, dtype=np.int64), vectors).run()
    rng = np.random.default_rng(2)
    stored = {i: vectors[i] for i in range(3000)}
    found = 0
    queries = rng.integers(0, 3000, 200)
    for row in queries:
        query = unit(vectors[row] + 0.02 * rng.standard_normal(DIMENSION))
        assert float(vectors[row] @ query) >= 0.9
        found += built.search(query, 4)[0][0] == exact_nearest(stored, query)
    assert found == len(queries)


def test_an_abandoned_build_leaves_the_index_as_it_was_and_due_again() -> None:
    vectors = clustered(40)
    index = VectorIndex(DIMENSION, exact_up_to=30)
    for ident, vector in enumerate(vectors):
        index.add(ident, vector)
    assert index.build_due() is not None
    index.abandon()
    assert not index.approximate
    assert index.build_due() is not None


def test_lists_grow_with_the_vectors_built_from_up_to_a_bound() -> None:
    assert lists_for(500) == 16
    assert lists_for(4097) == 64
    assert lists_for(65536) == MAX_LISTS
    assert lists_for(10**7) == MAX_LISTS


def test_an_inverted_file_is_rebuilt_with_more_lists_once_it_grew_enough() -> None:
    vectors = clustered(11_200, seed=3)
    small = InvertedFile.trained(vectors[:700])  # 16 lists
    small.add_all(np.arange(700, dtype=np.int64), vectors[:700])
    index = VectorIndex(DIMENSION, exact_up_to=100)
    index.install(small)
    for ident in range(700, 11_199):
        index.add(ident, vectors[ident])
    assert index.build_due() is None  # not yet 16 times what it was built from
    index.add(11_199, vectors[11_199])
    build = index.build_due()
    assert build is not None
    assert len(build.ids) == 11_200
    index.install(build.run())
    assert len(index) == 11_200
    assert index.search(vectors[5000], 1)[0][0] == 5000


def test_every_thread_that_calls_faiss_keeps_it_to_one_openmp_thread() -> None:
    # OpenMP's thread count is a setting of each calling thread: pinned only in the thread that
    # built the index, the event loop's searches and adds ran on every core, and the idle
    # OpenMP workers spun. A fresh thread starts from OpenMP's default (4 here).
    import faiss

    vectors = clustered(2000)
    built = Build(np.arange(1, 2001, dtype=np.int64), vectors).run()
    threads_seen = []

    def search_and_add() -> None:
        faiss.omp_set_num_threads(4)
        built.add(5000, vectors[0])
        built.search(vectors[1], 2)
        threads_seen.append(faiss.omp_get_max_threads())

    for _ in range(2):
        other = threading.Thread(target=search_and_add)
        other.start()
        other.join()
    assert threads_seen == [1, 1]
