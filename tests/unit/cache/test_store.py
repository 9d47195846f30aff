"""cache/store.py: the exact and semantic layers, TTL, LRU per scope and over the whole cache,
sweep, entries/restore.

The embedder is a fake with hand-made vectors, so the similarities are known exactly; the real
model is tested in test_embedder.py and test_semantic_quality.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cache.keys import CacheKeys, cache_keys
from cache.referee import (
    UNMEASURED_MARGIN,
    Referee,
    referee_band_below,
    referee_margin,
    settled,
)
from cache.store import AnswerCache, CacheBounds, Entry, Hit, Miss, footprint
from policies.model import CacheRule

QUESTION = "How do I reverse a list in Python?"
PARAPHRASE = "How can I reverse a list in Python?"  # cosine 0.95 with QUESTION
UNRELATED = "What is the weather like in Oslo today?"  # cosine 0.5 with QUESTION
TIMES_23 = "What is 17 times 23?"
TIMES_24 = "What is 17 times 24?"  # cosine 0.995 with TIMES_23: a near miss


def unit(*values: float) -> np.ndarray:
    vector = np.array(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def around(cosine: float, axis: int = 0, toward: int = 1) -> np.ndarray:
    """A unit vector at `cosine` from the unit vector of `axis`."""
    values = [0.0] * 8
    values[axis], values[toward] = cosine, float(np.sqrt(1 - cosine**2))
    return unit(*values)


VECTORS = {
    QUESTION: unit(1, 0, 0, 0, 0, 0, 0, 0),
    PARAPHRASE: around(0.95),
    UNRELATED: around(0.5, toward=2),
    TIMES_23: unit(0, 0, 0, 1, 0, 0, 0, 0),
    TIMES_24: around(0.995, axis=3, toward=4),
}


class FakeEmbedder:
    def __init__(self, vectors: dict[str, np.ndarray] | None = None, ready: bool = True) -> None:
        self.vectors = dict(VECTORS if vectors is None else vectors)
        self.calls: list[str] = []
        self.ready = ready
        self.warmed = 0
        self.gates: dict[str, asyncio.Event] = {}  # embedding these texts waits for the test

    def warm(self) -> None:
        self.warmed += 1

    async def embed(self, text: str) -> np.ndarray:
        self.calls.append(text)
        if text in self.gates:
            await self.gates[text].wait()
        return self.vectors[text]


class Clock:
    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def keys(
    question: str,
    tenant: str = "acme",
    system: str = "You are terse.",
    **fields: Any,
) -> CacheKeys:
    messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
    body = {"model": "llama", "messages": messages, "temperature": 0, **fields}
    return cache_keys("chat", body, tenant, "llama", "v1")


def answer(text: str) -> bytes:
    return (
        f'{{"object":"chat.completion","choices":[{{"message":{{"content":"{text}"}}}}]}}'.encode()
    )


RULE = CacheRule(ttl_s=60, max_entries=100, threshold=0.9)


@pytest.fixture
def embedder() -> FakeEmbedder:
    return FakeEmbedder()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def cache(embedder: FakeEmbedder, clock: Clock) -> AnswerCache:
    return AnswerCache(embedder, clock)


async def insert(cache: AnswerCache, question: str, rule: CacheRule = RULE, **kw: Any) -> None:
    await cache.insert(keys(question, **kw), rule, answer(question))


async def test_an_answer_without_its_usage_serves_only_clients_that_are_not_told_it(
    embedder: FakeEmbedder,
) -> None:
    """Assembled from a stream that did not ask for usage: a stream like it is served, a
    request that must be told the usage (whole, or a stream asking) misses, exactly and
    semantically, and its own answer replaces the stored one."""
    cache = AnswerCache(embedder, Clock())
    await cache.insert(keys(QUESTION), RULE, answer(QUESTION), usage_unknown=True)
    assert isinstance(await cache.lookup(keys(QUESTION), RULE, semantic=True), Hit)
    told = await cache.lookup(keys(QUESTION), RULE, semantic=True, needs_usage=True)
    assert isinstance(told, Miss)
    similar = await cache.lookup(keys(PARAPHRASE), RULE, semantic=True, needs_usage=True)
    assert isinstance(similar, Miss)
    assert isinstance(await cache.lookup(keys(PARAPHRASE), RULE, semantic=True), Hit)
    await cache.insert(keys(QUESTION), RULE, answer(QUESTION))  # the whole answer, with usage
    assert isinstance(await cache.lookup(keys(QUESTION), RULE, True, needs_usage=True), Hit)
    assert (len(cache), cache.stats.stored) == (1, 2)


# --- the exact layer -----------------------------------------------------------------------------


async def test_exact_miss_then_hit(cache: AnswerCache) -> None:
    assert isinstance(await cache.lookup(keys(QUESTION), RULE, semantic=False), Miss)
    await insert(cache, QUESTION)
    assert await cache.lookup(keys(QUESTION), RULE, semantic=False) == Hit(
        "exact", answer(QUESTION), 1.0
    )
    assert (cache.stats.hits_exact, cache.stats.misses) == (1, 1)
    assert len(cache) == 1


async def test_exact_hit_needs_no_embedding(cache: AnswerCache, embedder: FakeEmbedder) -> None:
    await cache.insert(keys(QUESTION), RULE, answer(QUESTION), VECTORS[QUESTION])
    assert isinstance(await cache.lookup(keys(QUESTION), RULE, semantic=True), Hit)
    assert embedder.calls == []


async def test_exact_layer_off_is_never_an_exact_hit(cache: AnswerCache) -> None:
    await insert(cache, QUESTION)
    assert isinstance(await cache.lookup(keys(QUESTION), CacheRule(exact=False), False), Miss)


async def test_a_second_insert_of_the_same_key_replaces_the_first(cache: AnswerCache) -> None:
    await cache.insert(keys(QUESTION), RULE, b"old")
    await cache.insert(keys(QUESTION), RULE, b"new")
    assert len(cache) == 1
    assert await cache.lookup(keys(QUESTION), RULE, False) == Hit("exact", b"new", 1.0)
    found = await cache.lookup(keys(PARAPHRASE), RULE, semantic=True)
    assert isinstance(found, Hit)
    assert found.answer == b"new"


# --- TTL -----------------------------------------------------------------------------------------


async def test_an_entry_expires_after_its_ttl(cache: AnswerCache, clock: Clock) -> None:
    await insert(cache, QUESTION, CacheRule(ttl_s=10))
    clock.now += 9.9
    assert isinstance(await cache.lookup(keys(QUESTION), RULE, False), Hit)
    clock.now += 0.1
    assert isinstance(await cache.lookup(keys(QUESTION), RULE, False), Miss)
    assert cache.stats.expired == 1
    assert len(cache) == 0


async def test_a_hit_does_not_extend_the_ttl(cache: AnswerCache, clock: Clock) -> None:
    await insert(cache, QUESTION, CacheRule(ttl_s=10))
    for _ in range(3):
        clock.now += 3
        assert isinstance(await cache.lookup(keys(QUESTION), RULE, False), Hit)
    clock.now += 3
    assert isinstance(await cache.lookup(keys(QUESTION), RULE, False), Miss)


async def test_an_expired_entry_is_no_semantic_hit(cache: AnswerCache, clock: Clock) -> None:
    await insert(cache, QUESTION, CacheRule(ttl_s=10))
    clock.now += 10
    found = await cache.lookup(keys(PARAPHRASE), RULE, semantic=True)
    assert isinstance(found, Miss)
    assert found.refused == ""
    assert len(cache) == 0
    assert cache.stats.expired == 1


# --- LRU per scope -------------------------------------------------------------------------------


async def test_the_least_recently_used_entry_is_evicted(cache: AnswerCache) -> None:
    rule = CacheRule(max_entries=3, semantic=False)
    for question in ("a", "b", "c"):
        await cache.insert(keys(question), rule, answer(question))
    assert isinstance(await cache.lookup(keys("a"), rule, False), Hit)  # "a" is used: "b" is LRU
    await cache.insert(keys("d"), rule, answer("d"))
    assert len(cache) == 3
    assert cache.stats.evicted == 1
    assert isinstance(await cache.lookup(keys("b"), rule, False), Miss)
    for question in ("a", "c", "d"):
        assert isinstance(await cache.lookup(keys(question), rule, False), Hit), question


async def test_without_lookups_the_oldest_insert_is_evicted(cache: AnswerCache) -> None:
    rule = CacheRule(max_entries=2, semantic=False)
    for question in ("a", "b", "c"):
        await cache.insert(keys(question), rule, answer(question))
    assert isinstance(await cache.lookup(keys("a"), rule, False), Miss)
    assert isinstance(await cache.lookup(keys("b"), rule, False), Hit)


async def test_a_semantic_hit_counts_as_a_use(cache: AnswerCache) -> None:
    rule = CacheRule(max_entries=2)
    await insert(cache, QUESTION, rule)
    await insert(cache, TIMES_23, rule)
    assert isinstance(await cache.lookup(keys(PARAPHRASE), rule, semantic=True), Hit)
    await insert(cache, UNRELATED, rule)  # TIMES_23 is now the least recently used
    assert isinstance(await cache.lookup(keys(TIMES_23), rule, False), Miss)
    assert isinstance(await cache.lookup(keys(QUESTION), rule, False), Hit)


async def test_each_scope_has_its_own_capacity(cache: AnswerCache) -> None:
    rule = CacheRule(max_entries=1, semantic=False)
    await cache.insert(keys("a", tenant="acme"), rule, b"acme")
    await cache.insert(keys("b", tenant="globex"), rule, b"globex")
    await cache.insert(keys("c", tenant="globex"), rule, b"globex")
    assert isinstance(await cache.lookup(keys("a", tenant="acme"), rule, False), Hit)
    assert isinstance(await cache.lookup(keys("b", tenant="globex"), rule, False), Miss)
    assert cache.stats.evicted == 1


# --- scopes --------------------------------------------------------------------------------------


async def test_scopes_isolate_the_same_exact_key(cache: AnswerCache) -> None:
    mine = keys(QUESTION)
    await cache.insert(mine, RULE, answer(QUESTION))
    theirs = CacheKeys("another-scope", mine.exact, mine.context, mine.query)
    assert isinstance(await cache.lookup(theirs, RULE, semantic=False), Miss)


async def test_another_tenant_never_hits(cache: AnswerCache) -> None:
    await insert(cache, QUESTION)
    assert isinstance(await cache.lookup(keys(QUESTION, tenant="globex"), RULE, True), Miss)
    assert isinstance(await cache.lookup(keys(PARAPHRASE, tenant="globex"), RULE, True), Miss)


# --- the semantic layer --------------------------------------------------------------------------


async def test_a_similar_question_is_a_semantic_hit(cache: AnswerCache) -> None:
    await insert(cache, QUESTION)
    found = await cache.lookup(keys(PARAPHRASE), RULE, semantic=True)
    assert isinstance(found, Hit)
    assert found.kind == "semantic"
    assert found.answer == answer(QUESTION)
    assert found.similarity == pytest.approx(0.95, abs=1e-5)
    assert cache.stats.hits_semantic == 1


async def test_below_the_threshold_is_a_miss(cache: AnswerCache) -> None:
    await insert(cache, QUESTION)
    found = await cache.lookup(keys(UNRELATED), RULE, semantic=True)
    assert isinstance(found, Miss)
    assert found.refused == ""
    strict = CacheRule(threshold=0.96)
    assert isinstance(await cache.lookup(keys(PARAPHRASE), strict, semantic=True), Miss)
    assert cache.stats.misses == 2
    assert cache.stats.refused == 0


async def test_the_threshold_is_inclusive_of_equal_similarity(cache: AnswerCache) -> None:
    await insert(cache, QUESTION)
    found = await cache.lookup(keys(PARAPHRASE), CacheRule(threshold=0.94), semantic=True)
    assert isinstance(found, Hit)


async def test_the_guard_refuses_a_near_miss(cache: AnswerCache) -> None:
    await insert(cache, TIMES_23)
    found = await cache.lookup(keys(TIMES_24), RULE, semantic=True)
    assert isinstance(found, Miss)
    assert found.refused
    assert found.vector is not None
    assert np.array_equal(found.vector, VECTORS[TIMES_24])
    assert cache.stats.refused == 1
    assert cache.stats.misses == 1
    assert cache.stats.hits_semantic == 0


async def test_semantic_search_stays_within_the_context(cache: AnswerCache) -> None:
    await insert(cache, QUESTION)
    other_prompt = keys(PARAPHRASE, system="You are a pirate.")
    assert isinstance(await cache.lookup(other_prompt, RULE, semantic=True), Miss)
    other_parameters = keys(PARAPHRASE, max_tokens=5)
    assert isinstance(await cache.lookup(other_parameters, RULE, semantic=True), Miss)


async def test_no_semantic_lookup_when_not_asked(
    cache: AnswerCache, embedder: FakeEmbedder
) -> None:
    await insert(cache, QUESTION)
    embedder.calls.clear()
    found = await cache.lookup(keys(PARAPHRASE), RULE, semantic=False)
    assert found == Miss()
    assert embedder.calls == []


async def test_no_semantic_lookup_without_a_query(
    cache: AnswerCache, embedder: FakeEmbedder
) -> None:
    no_query = CacheKeys("scope", "exact", None, None)
    assert await cache.lookup(no_query, RULE, semantic=True) == Miss()
    assert embedder.calls == []


async def test_without_an_embedder_the_exact_layer_still_works(clock: Clock) -> None:
    cache = AnswerCache(None, clock)
    await insert(cache, QUESTION)
    assert await cache.lookup(keys(PARAPHRASE), RULE, semantic=True) == Miss()
    assert isinstance(await cache.lookup(keys(QUESTION), RULE, semantic=True), Hit)


async def test_an_embedder_still_loading_gives_a_miss_at_once(clock: Clock) -> None:
    embedder = FakeEmbedder(ready=False)
    cache = AnswerCache(embedder, clock)
    await cache.insert(keys(QUESTION), RULE, answer(QUESTION), VECTORS[QUESTION])
    assert await cache.lookup(keys(PARAPHRASE), RULE, semantic=True) == Miss()
    assert embedder.calls == []
    assert embedder.warmed == 1
    assert isinstance(await cache.lookup(keys(QUESTION), RULE, semantic=True), Hit)
    embedder.ready = True
    assert isinstance(await cache.lookup(keys(PARAPHRASE), RULE, semantic=True), Hit)


async def test_the_lookup_vector_is_reused_by_the_insert(
    cache: AnswerCache, embedder: FakeEmbedder
) -> None:
    miss = await cache.lookup(keys(QUESTION), RULE, semantic=True)
    assert isinstance(miss, Miss)
    assert miss.vector is not None
    assert np.array_equal(miss.vector, VECTORS[QUESTION])
    assert embedder.calls == [QUESTION]
    await cache.insert(keys(QUESTION), RULE, answer(QUESTION), miss.vector)
    assert embedder.calls == [QUESTION]
    assert isinstance(await cache.lookup(keys(PARAPHRASE), RULE, semantic=True), Hit)


async def test_insert_embeds_when_the_lookup_did_not(
    cache: AnswerCache, embedder: FakeEmbedder
) -> None:
    await cache.insert(keys(QUESTION), RULE, answer(QUESTION))
    assert embedder.calls == [QUESTION]
    assert isinstance(await cache.lookup(keys(PARAPHRASE), RULE, semantic=True), Hit)


async def slow_insert(cache: AnswerCache, embedder: FakeEmbedder) -> asyncio.Task[None]:
    """Insert QUESTION, whose embedding waits until the test sets its gate."""
    embedder.gates[QUESTION] = asyncio.Event()
    task = asyncio.create_task(cache.insert(keys(QUESTION), RULE, answer(QUESTION)))
    for _ in range(5):
        await asyncio.sleep(0)
    assert embedder.calls == [QUESTION]
    return task


async def test_an_answer_is_an_exact_hit_while_its_question_is_embedded(
    cache: AnswerCache, embedder: FakeEmbedder
) -> None:
    task = await slow_insert(cache, embedder)
    assert isinstance(await cache.lookup(keys(QUESTION), RULE, semantic=False), Hit)
    embedder.gates[QUESTION].set()
    await task
    assert isinstance(await cache.lookup(keys(PARAPHRASE), RULE, semantic=True), Hit)
    assert len(cache) == 1


async def test_a_newer_answer_stored_during_the_embedding_is_kept(
    cache: AnswerCache, embedder: FakeEmbedder
) -> None:
    task = await slow_insert(cache, embedder)
    await cache.insert(keys(QUESTION), RULE, b"newer", VECTORS[QUESTION])
    embedder.gates[QUESTION].set()
    await task
    assert len(cache) == 1
    assert await cache.lookup(keys(QUESTION), RULE, False) == Hit("exact", b"newer", 1.0)
    found = await cache.lookup(keys(PARAPHRASE), RULE, semantic=True)
    assert isinstance(found, Hit)
    assert found.answer == b"newer"


async def test_an_entry_evicted_during_the_embedding_is_not_brought_back(
    cache: AnswerCache, embedder: FakeEmbedder
) -> None:
    task = await slow_insert(cache, embedder)
    await cache.insert(keys(UNRELATED), CacheRule(max_entries=1), answer(UNRELATED))
    embedder.gates[QUESTION].set()
    await task
    assert len(cache) == 1
    assert isinstance(await cache.lookup(keys(QUESTION), RULE, False), Miss)
    assert isinstance(await cache.lookup(keys(PARAPHRASE), RULE, semantic=True), Miss)


async def test_an_entry_swept_during_the_embedding_is_not_brought_back(
    cache: AnswerCache, embedder: FakeEmbedder, clock: Clock
) -> None:
    task = await slow_insert(cache, embedder)
    clock.now += RULE.ttl_s
    assert cache.sweep() == 1
    embedder.gates[QUESTION].set()
    await task
    assert len(cache) == 0
    assert cache.entries() == []


async def test_insert_does_not_embed_for_an_exact_only_rule(
    cache: AnswerCache, embedder: FakeEmbedder
) -> None:
    await cache.insert(keys(QUESTION), CacheRule(semantic=False), answer(QUESTION))
    assert embedder.calls == []
    assert isinstance(await cache.lookup(keys(PARAPHRASE), RULE, semantic=True), Miss)


async def test_no_vector_is_kept_without_a_context(cache: AnswerCache) -> None:
    plain = cache_keys("completions", {"prompt": QUESTION, "temperature": 0}, "a", "m", "v")
    await cache.insert(plain, RULE, b"{}", VECTORS[QUESTION])
    [entry] = cache.entries()
    assert entry.vector is None


async def test_the_nearest_accepted_candidate_wins(cache: AnswerCache) -> None:
    close, closer = "How to reverse a list in Python?", "How would I reverse a list in Python?"
    vectors = {**VECTORS, close: around(0.99), closer: around(0.999)}
    cache.embedder = FakeEmbedder(vectors)
    await insert(cache, close)
    await insert(cache, closer)
    found = await cache.lookup(keys(QUESTION), RULE, semantic=True)
    assert isinstance(found, Hit)
    assert found.answer == answer(closer)
    assert found.similarity == pytest.approx(0.999, abs=1e-5)


# --- dropped entries leave the index -------------------------------------------------------------


# paraphrases of QUESTION, which the guard lets through
NEAR = [
    "How to reverse a list in Python?",
    "How would I reverse a list in Python?",
    "how do i reverse a list in Python",
    "How should I reverse a list in Python?",
]


def crowded() -> FakeEmbedder:
    """Four questions nearer QUESTION than PARAPHRASE is, all at 0.99 or more."""
    vectors = {**VECTORS}
    for i, name in enumerate(NEAR):
        vectors[name] = around(0.999 - i * 0.002, toward=2 + i)
    return FakeEmbedder(vectors)


async def test_an_evicted_entry_is_no_longer_found_by_a_semantic_lookup(clock: Clock) -> None:
    cache = AnswerCache(crowded(), clock)
    rule = CacheRule(max_entries=1)
    await insert(cache, NEAR[0], rule)
    assert isinstance(await cache.lookup(keys(QUESTION), rule, semantic=True), Hit)
    await insert(cache, UNRELATED, rule)  # evicts NEAR[0]
    found = await cache.lookup(keys(QUESTION), rule, semantic=True)
    assert isinstance(found, Miss)
    assert cache.stats.evicted == 1


async def test_evicted_vectors_do_not_crowd_out_the_live_ones(clock: Clock) -> None:
    cache = AnswerCache(crowded(), clock)
    rule = CacheRule(max_entries=5)
    await insert(cache, PARAPHRASE, rule)
    for name in NEAR:
        await insert(cache, name, rule)
    assert isinstance(await cache.lookup(keys(PARAPHRASE), rule, False), Hit)  # used: not LRU
    for i in range(4):  # these four go; PARAPHRASE must still be found among the nearest
        await cache.insert(keys(f"other {i}"), CacheRule(max_entries=5, semantic=False), b"x")
    assert isinstance(await cache.lookup(keys(NEAR[0]), rule, False), Miss)
    found = await cache.lookup(keys(QUESTION), rule, semantic=True)
    assert isinstance(found, Hit)
    assert found.answer == answer(PARAPHRASE)


async def test_a_growing_context_is_searched_while_and_after_its_index_is_rebuilt(
    clock: Clock,
) -> None:
    """Past `exact_up_to` vectors the context's index is rebuilt as an inverted file in a worker
    thread; lookups go on meanwhile, and entries stored or evicted during the build are found
    or not as they should be once it is installed."""
    names = [f"Tell me about the {word} river" for word in WORDS]
    rng = np.random.default_rng(5)
    vectors = {name: unit(*rng.standard_normal(8)) for name in names}
    asked = {
        f"Please tell me about the {w} river": vectors[n] for w, n in zip(WORDS, names, strict=True)
    }
    cache = AnswerCache(FakeEmbedder({**vectors, **asked}), clock, exact_up_to=16)
    rule = CacheRule(max_entries=len(names) - 1)
    for name in names[:17]:
        await insert(cache, name, rule)
    assert cache._builds  # the 17th started a build
    for name in names[17:]:  # while it runs; the last one evicts the first
        await insert(cache, name, rule)
    await cache.built()
    assert cache._contexts[keys(names[1]).context or ""].approximate
    for question, name in zip(asked, names, strict=True):
        found = await cache.lookup(keys(question), rule, semantic=True)
        if name == names[0]:
            assert isinstance(found, Miss)
        else:
            assert isinstance(found, Hit), question
            assert found.answer == answer(name)


WORDS = (
    "Nile Amazon Danube Rhine Volga Thames Seine Loire Elbe Oder Vistula Tagus Ebro Po Tiber "
    "Indus Ganges Mekong Yangtze Niger Congo Zambezi Orinoco Parana Yukon Hudson Ohio Missouri"
).split()


async def test_swept_vectors_do_not_crowd_out_the_live_ones(clock: Clock) -> None:
    cache = AnswerCache(crowded(), clock)
    await insert(cache, PARAPHRASE, CacheRule(ttl_s=1000))
    for name in NEAR:
        await insert(cache, name, CacheRule(ttl_s=10))
    clock.now += 10
    assert cache.sweep() == 4
    found = await cache.lookup(keys(QUESTION), RULE, semantic=True)
    assert isinstance(found, Hit)
    assert found.answer == answer(PARAPHRASE)


async def test_expired_candidates_are_skipped_and_dropped(clock: Clock) -> None:
    cache = AnswerCache(crowded(), clock)
    await insert(cache, PARAPHRASE, CacheRule(ttl_s=1000))
    await insert(cache, NEAR[0], CacheRule(ttl_s=10))
    clock.now += 10
    found = await cache.lookup(keys(QUESTION), RULE, semantic=True)
    assert isinstance(found, Hit)
    assert found.answer == answer(PARAPHRASE)
    assert len(cache) == 1
    assert cache.stats.expired == 1


async def test_a_replaced_entry_leaves_the_index(cache: AnswerCache) -> None:
    await cache.insert(keys(QUESTION), RULE, b"old")
    await cache.insert(keys(QUESTION), RULE, b"new")
    await cache.insert(keys(QUESTION, tenant="x"), RULE, b"other")
    found = await cache.lookup(keys(PARAPHRASE), RULE, semantic=True)
    assert isinstance(found, Hit)
    assert found.answer == b"new"


# --- sweep, entries, restore ---------------------------------------------------------------------


async def test_sweep_drops_only_the_expired(cache: AnswerCache, clock: Clock) -> None:
    for question in ("a", "b", "c"):
        await insert(cache, question, CacheRule(ttl_s=10, semantic=False))
    await insert(cache, "d", CacheRule(ttl_s=100, semantic=False))
    clock.now += 50
    assert cache.sweep() == 3
    assert len(cache) == 1
    assert cache.stats.expired == 3
    assert cache.sweep() == 0
    assert isinstance(await cache.lookup(keys("d"), RULE, False), Hit)


async def test_entries_are_the_live_ones_least_recently_used_first(
    cache: AnswerCache, clock: Clock
) -> None:
    rule = CacheRule(semantic=False)
    for question in ("a", "b", "c"):
        await insert(cache, question, rule)
    await insert(cache, "short", CacheRule(ttl_s=5, semantic=False))
    await cache.lookup(keys("a"), rule, False)
    clock.now += 10
    assert [e.keys.query for e in cache.entries()] == ["b", "c", "a"]


async def test_entries_restore_round_trip(cache: AnswerCache, clock: Clock) -> None:
    await insert(cache, QUESTION)
    await insert(cache, TIMES_23)
    await insert(cache, "plain", CacheRule(semantic=False))
    await insert(cache, QUESTION, tenant="globex")
    saved = cache.entries()
    assert len(saved) == 4

    restored = AnswerCache(FakeEmbedder(), clock)
    restored.restore(saved)
    assert len(restored) == 4
    assert [(e.keys, e.answer, e.created, e.expires) for e in restored.entries()] == [
        (e.keys, e.answer, e.created, e.expires) for e in saved
    ]
    for question in (QUESTION, TIMES_23, "plain"):
        assert isinstance(await restored.lookup(keys(question), RULE, False), Hit), question
    found = await restored.lookup(keys(PARAPHRASE), RULE, semantic=True)
    assert isinstance(found, Hit)
    assert found.kind == "semantic"
    assert restored.embedder is not None
    assert restored.embedder.calls == [PARAPHRASE]  # type: ignore[attr-defined]


async def test_a_restored_context_is_built_once_from_all_its_questions(clock: Clock) -> None:
    """A restart restores thousands of questions: one build from all of them, started at once,
    not one from the first `exact_up_to` with the rest replayed and a rebuild at the first
    lookup (seconds of both cores under the first requests); and the models start loading."""
    names = [f"Tell me about the {word} river" for word in WORDS]
    rng = np.random.default_rng(9)
    vectors = {name: unit(*rng.standard_normal(8)) for name in names}
    asked = "Please tell me about the Niger river"
    vectors[asked] = vectors["Tell me about the Niger river"]
    source = AnswerCache(FakeEmbedder(vectors), clock, exact_up_to=len(names))
    for name in names:
        await insert(source, name, CacheRule(max_entries=len(names)))
    models = FakeEmbedder(vectors, ready=False)
    restored = AnswerCache(models, clock, exact_up_to=16)
    restored.restore([])
    assert models.warmed == 0  # nothing to search: no model loaded for it
    restored.restore(source.entries())
    assert restored.building == 1  # before any lookup
    assert models.warmed == 1  # the models load now, not at the first lookup
    models.ready = True
    await restored.built()
    index = restored._contexts[keys(names[0]).context or ""]
    assert index.built_from == len(names)
    found = await restored.lookup(keys(asked), RULE, semantic=True)
    assert isinstance(found, Hit)
    assert found.answer == answer("Tell me about the Niger river")
    assert restored.building == 0  # the lookup started no rebuild


async def test_restore_keeps_the_original_expiry(cache: AnswerCache, clock: Clock) -> None:
    await insert(cache, QUESTION, CacheRule(ttl_s=10))
    restored = AnswerCache(FakeEmbedder(), clock)
    restored.restore(cache.entries())
    clock.now += 10
    assert isinstance(await restored.lookup(keys(QUESTION), RULE, False), Miss)


async def test_restore_into_a_used_cache_gives_fresh_idents(cache: AnswerCache) -> None:
    await insert(cache, QUESTION)
    other = AnswerCache(FakeEmbedder(), cache.clock)
    await insert(other, TIMES_23)
    other.restore(cache.entries())
    assert len({e.ident for e in other.entries()}) == 2
    assert isinstance(await other.lookup(keys(PARAPHRASE), RULE, True), Hit)
    assert isinstance(await other.lookup(keys(TIMES_23), RULE, False), Hit)


async def test_changes_count_additions_and_drops(cache: AnswerCache, clock: Clock) -> None:
    assert cache.changes == 0
    await insert(cache, QUESTION, CacheRule(ttl_s=10))
    after_insert = cache.changes
    assert after_insert > 0
    await cache.lookup(keys(QUESTION), RULE, False)
    assert cache.changes == after_insert  # a hit is not worth a save
    clock.now += 10
    cache.sweep()
    assert cache.changes > after_insert


# --- the referee: borderline similarities settled by the reference model -------------------------

BORDERLINE = "How would I go about reversing a Python list?"  # fast 0.92: within 0.05 of 0.9
CLEAR = "How can I reverse a Python list, please?"  # fast 0.97: clearly above 0.9 + 0.05


def refereed_cache(
    reference: dict[str, float], ready: bool = True
) -> tuple[AnswerCache, FakeEmbedder]:
    """A cache whose fast embedder puts BORDERLINE at 0.92 from QUESTION and whose referee puts
    each looked-up question at `reference[question]` from it."""
    fast = FakeEmbedder({**VECTORS, BORDERLINE: around(0.92), CLEAR: around(0.97)})
    referee = FakeEmbedder(
        {QUESTION: VECTORS[QUESTION]}
        | {question: around(cosine) for question, cosine in reference.items()},
        ready=ready,
    )
    return AnswerCache(fast, Clock(), referee=Referee(referee, margin=lambda: 0.05)), referee


def test_settled_leaves_only_the_band_around_the_threshold_to_the_referee() -> None:
    assert settled(0.951, 0.90, 0.05) is True
    assert settled(0.9499, 0.90, 0.05) is None
    assert settled(0.90, 0.90, 0.05) is None
    assert settled(0.85, 0.90, 0.05) is None
    assert settled(0.8499, 0.90, 0.05) is False
    assert settled(0.90, 0.90, 0.0) is True  # no referee: the threshold itself decides
    assert settled(0.8999, 0.90, 0.0) is False


def test_below_the_threshold_the_band_can_be_narrower() -> None:
    assert settled(0.86, 0.90, 0.073) is None
    assert settled(0.86, 0.90, 0.073, below=0.037) is False
    assert settled(0.864, 0.90, 0.073, below=0.037) is None
    assert settled(0.97, 0.90, 0.073, below=0.037) is None  # above: the full margin still
    assert settled(0.973, 0.90, 0.073, below=0.037) is True


def test_the_band_below_is_the_measured_shift_rounded_up() -> None:
    assert referee_band_below(0.0362) == 0.037
    assert referee_band_below(0.036) == 0.036
    assert referee_band_below(0.0) == 0.0
    assert referee_band_below(0.0362) < referee_margin(0.0362)


async def test_the_referee_is_not_asked_below_its_band_under_the_threshold() -> None:
    """A fast similarity under the threshold by more than the shift ever measured is a miss at
    once: the referee could only have turned it into a hit, and rarely would."""
    far, near = "Reverse list python how?", "Reversing a list in python?"
    fast = FakeEmbedder({**VECTORS, far: around(0.86), near: around(0.88)})
    referee = FakeEmbedder({QUESTION: VECTORS[QUESTION], far: around(0.905), near: around(0.905)})
    cache = AnswerCache(fast, Clock(), referee=Referee(referee, lambda: 0.05, lambda: 0.03))
    await insert(cache, QUESTION)
    assert isinstance(await cache.lookup(keys(far), RULE, semantic=True), Miss)
    assert referee.calls == []
    assert isinstance(await cache.lookup(keys(near), RULE, semantic=True), Hit)
    assert cache.stats.refereed == 1


@given(st.floats(min_value=0.0, max_value=0.5))
def test_the_margin_is_never_below_the_measured_shift_and_has_headroom(shift: float) -> None:
    margin = referee_margin(shift)
    assert margin > shift
    assert margin >= 2 * shift - 1e-9  # float noise below a millionth of the rounding
    assert margin >= shift + 0.01 - 1e-9
    assert margin == round(margin, 3)  # thousandths, as an operator reads it
    assert margin <= 2 * shift + 0.011  # no more than the rounding beyond the rule


def test_the_margin_of_some_measured_shifts() -> None:
    assert referee_margin(0.0362) == 0.073
    assert referee_margin(0.003) == 0.013  # a model that barely moves anything: 0.01 over it
    assert referee_margin(0.0) == 0.01


async def test_the_margin_is_read_when_a_similarity_is_placed() -> None:
    """The fast model's margin is measured on it, and it loads after the cache is built: the
    cache asks for the margin at each lookup, not once."""
    margin = [0.01]  # 0.92 is clear of 0.90 by more than that: no referee
    fast = FakeEmbedder({**VECTORS, BORDERLINE: around(0.92)})
    referee = FakeEmbedder({QUESTION: VECTORS[QUESTION], BORDERLINE: around(0.91)})
    cache = AnswerCache(fast, Clock(), referee=Referee(referee, lambda: margin[0]))
    await insert(cache, QUESTION)
    assert isinstance(await cache.lookup(keys(BORDERLINE), RULE, semantic=True), Hit)
    assert cache.stats.refereed == 0
    margin[0] = 0.03
    hit = await cache.lookup(keys(BORDERLINE), RULE, semantic=True)
    assert isinstance(hit, Hit)
    assert hit.similarity == pytest.approx(0.91, abs=1e-6)  # the referee's
    assert cache.stats.refereed == 1


async def test_an_unmeasured_margin_hands_every_candidate_to_the_referee() -> None:
    fast = FakeEmbedder({**VECTORS, CLEAR: around(0.97)})
    referee = FakeEmbedder({QUESTION: VECTORS[QUESTION], CLEAR: around(0.97)})
    cache = AnswerCache(fast, Clock(), referee=Referee(referee, lambda: UNMEASURED_MARGIN))
    await insert(cache, QUESTION)
    assert isinstance(await cache.lookup(keys(CLEAR), RULE, semantic=True), Hit)
    assert cache.stats.refereed == 1
    assert settled(1.0, 0.0, UNMEASURED_MARGIN) is None
    assert settled(-1.0, 1.0, UNMEASURED_MARGIN) is None


async def test_a_clear_similarity_needs_no_referee() -> None:
    cache, referee = refereed_cache({CLEAR: 0.5})
    await insert(cache, QUESTION)
    hit = await cache.lookup(keys(CLEAR), RULE, semantic=True)
    assert isinstance(hit, Hit)
    assert hit.similarity == pytest.approx(0.97)
    assert referee.calls == []
    assert cache.stats.refereed == 0


async def test_the_referee_confirms_a_borderline_hit_with_its_own_similarity() -> None:
    cache, referee = refereed_cache({BORDERLINE: 0.91})
    await insert(cache, QUESTION)
    hit = await cache.lookup(keys(BORDERLINE), RULE, semantic=True)
    assert isinstance(hit, Hit)
    assert hit.similarity == pytest.approx(0.91, abs=1e-6)
    assert sorted(referee.calls) == sorted([BORDERLINE, QUESTION])
    assert (cache.stats.refereed, cache.stats.overturned) == (1, 0)


async def test_the_referee_overturns_a_borderline_hit() -> None:
    cache, _ = refereed_cache({BORDERLINE: 0.89})
    await insert(cache, QUESTION)
    assert isinstance(await cache.lookup(keys(BORDERLINE), RULE, semantic=True), Miss)
    assert (cache.stats.refereed, cache.stats.overturned, cache.stats.misses) == (1, 1, 1)


async def test_the_referee_turns_a_borderline_miss_into_a_hit() -> None:
    below = "Reverse list python how?"  # fast 0.88: a miss by the fast model alone
    cache, _ = refereed_cache({below: 0.905})
    cache.embedder.vectors[below] = around(0.88)  # type: ignore[union-attr]
    await insert(cache, QUESTION)
    hit = await cache.lookup(keys(below), RULE, semantic=True)
    assert isinstance(hit, Hit)
    assert hit.similarity == pytest.approx(0.905, abs=1e-6)
    assert cache.stats.overturned == 1


async def test_an_entry_reference_vector_is_computed_once() -> None:
    cache, referee = refereed_cache({BORDERLINE: 0.91})
    await insert(cache, QUESTION)
    await cache.lookup(keys(BORDERLINE), RULE, semantic=True)
    await cache.lookup(keys(BORDERLINE, system="You are terse."), RULE, semantic=True)
    assert referee.calls.count(QUESTION) == 1
    assert referee.calls.count(BORDERLINE) == 2  # a lookup's own question: once per lookup


async def test_a_referee_still_loading_serves_no_borderline_hit() -> None:
    cache, referee = refereed_cache({BORDERLINE: 0.95}, ready=False)
    await insert(cache, QUESTION)
    assert isinstance(await cache.lookup(keys(BORDERLINE), RULE, semantic=True), Miss)
    assert referee.warmed >= 1
    assert cache.stats.unrefereed == 1
    assert isinstance(await cache.lookup(keys(CLEAR), RULE, semantic=True), Hit)


async def test_a_failing_referee_is_a_miss_not_an_error() -> None:
    cache, _ = refereed_cache({})  # knows no BORDERLINE: embed raises KeyError
    await insert(cache, QUESTION)
    assert isinstance(await cache.lookup(keys(BORDERLINE), RULE, semantic=True), Miss)
    assert cache.stats.unrefereed == 1


async def test_a_loading_embedder_warms_the_referee_too() -> None:
    referee = FakeEmbedder(ready=False)
    cache = AnswerCache(FakeEmbedder(ready=False), Clock(), referee=Referee(referee, lambda: 0.05))
    await cache.lookup(keys(QUESTION), RULE, semantic=True)
    assert referee.warmed == 1


async def test_the_guard_refuses_before_the_referee_is_asked() -> None:
    """A near-miss in the band ("17 times 24" vs "17 times 23") costs the guard's microseconds,
    not the referee's milliseconds."""
    cache, referee = refereed_cache({})
    cache.embedder.vectors[TIMES_24] = around(0.92, axis=3, toward=4)  # type: ignore[union-attr]
    await insert(cache, TIMES_23)
    found = await cache.lookup(keys(TIMES_24), RULE, semantic=True)
    assert isinstance(found, Miss)
    assert found.refused
    assert referee.calls == []
    assert (cache.stats.refused, cache.stats.refereed) == (1, 0)


# --- the whole cache's bounds, across scopes -----------------------------------------------------

EXACT_ONLY = CacheRule(max_entries=3, semantic=False)


async def store(cache: AnswerCache, tenant: str, question: str = "q", size: int = 0) -> None:
    """An exact-only answer from `tenant` (a scope of its own), padded to `size` bytes."""
    await cache.insert(keys(question, tenant=tenant), EXACT_ONLY, answer(question).ljust(size))


async def held(cache: AnswerCache, tenant: str, question: str = "q") -> bool:
    """Whether the answer is still there (an exact lookup: it refreshes the entry's recency)."""
    return isinstance(await cache.lookup(keys(question, tenant=tenant), EXACT_ONLY, False), Hit)


def tenants(cache: AnswerCache) -> list[str]:
    """The tenants whose answers the cache holds, least recently used first."""
    scopes = {keys("q", tenant=f"t{i}").scope: f"t{i}" for i in range(100)}
    return [scopes[e.keys.scope] for e in cache.entries()]


def test_bounds_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        CacheBounds(max_entries=0)
    with pytest.raises(ValueError, match="positive"):
        CacheBounds(max_bytes=0)


async def test_invented_scopes_cannot_grow_the_cache_past_its_bound(clock: Clock) -> None:
    """30 invented tenant names, 2 answers each, under a per-scope bound of 3: the whole cache
    still holds no more than its own bound, the most recent answers."""
    cache = AnswerCache(None, clock, bounds=CacheBounds(max_entries=5))
    for i in range(30):
        await store(cache, f"t{i}", "a")
        await store(cache, f"t{i}", "b")
    assert len(cache) == 5
    assert cache.stats.evicted == 55
    assert [(t, e.keys.query) for t, e in zip(tenants(cache), cache.entries(), strict=True)] == [
        ("t27", "b"),
        ("t28", "a"),
        ("t28", "b"),
        ("t29", "a"),
        ("t29", "b"),
    ]


async def test_the_globally_least_recently_used_entry_goes_first(clock: Clock) -> None:
    cache = AnswerCache(None, clock, bounds=CacheBounds(max_entries=3))
    for tenant in ("t1", "t2", "t3"):
        await store(cache, tenant)
    await store(cache, "t4")
    assert tenants(cache) == ["t2", "t3", "t4"]
    assert not await held(cache, "t1")
    assert cache.stats.evicted == 1


async def test_an_exact_hit_refreshes_recency_across_scopes(clock: Clock) -> None:
    cache = AnswerCache(None, clock, bounds=CacheBounds(max_entries=3))
    for tenant in ("t1", "t2", "t3"):
        await store(cache, tenant)
    assert await held(cache, "t1")  # t1 is used: t2 is now the oldest of the whole cache
    await store(cache, "t4")
    assert tenants(cache) == ["t3", "t1", "t4"]


async def test_a_semantic_hit_refreshes_recency_across_scopes(clock: Clock) -> None:
    cache = AnswerCache(FakeEmbedder(), clock, bounds=CacheBounds(max_entries=3))
    for tenant in ("t1", "t2", "t3"):
        await insert(cache, QUESTION, tenant=tenant)
    found = await cache.lookup(keys(PARAPHRASE, tenant="t1"), RULE, semantic=True)
    assert isinstance(found, Hit)
    assert found.kind == "semantic"
    await insert(cache, QUESTION, tenant="t4")
    assert tenants(cache) == ["t3", "t1", "t4"]


async def test_a_scope_evicting_its_own_entry_spares_the_other_scopes(clock: Clock) -> None:
    """The scope's bound applies first: an insert into a full scope makes room there rather
    than in another scope, even one used less recently."""
    cache = AnswerCache(None, clock, bounds=CacheBounds(max_entries=4))
    await store(cache, "t1")
    for question in ("a", "b", "c"):
        await store(cache, "t2", question)
    await store(cache, "t2", "d")
    assert tenants(cache) == ["t1", "t2", "t2", "t2"]
    assert [e.keys.query for e in cache.entries()] == ["q", "b", "c", "d"]


async def test_the_byte_bound_evicts_until_the_cache_is_under_it(clock: Clock) -> None:
    probe = AnswerCache(None, clock)
    await store(probe, "t0", size=1000)
    [entry] = probe.entries()
    size = footprint(entry)
    assert size > 1000  # its keys count too
    bound = 3 * size + size // 2
    cache = AnswerCache(None, clock, bounds=CacheBounds(max_bytes=bound))
    for tenant in ("t1", "t2", "t3", "t4"):
        await store(cache, tenant, size=1000)
    assert tenants(cache) == ["t2", "t3", "t4"]
    await store(cache, "t5", size=size + 1000)  # weighs two: t2 and t3 must go
    assert tenants(cache) == ["t4", "t5"]
    assert sum(footprint(e) for e in cache.entries()) <= bound
    assert cache.stats.evicted == 3


async def test_an_answer_heavier_than_the_whole_cache_is_not_kept(clock: Clock) -> None:
    embedder = FakeEmbedder()
    cache = AnswerCache(embedder, clock, bounds=CacheBounds(max_bytes=4000))
    await cache.insert(keys(QUESTION), RULE, b"small")
    await cache.insert(keys(TIMES_23), RULE, b"x" * 4000)
    await cache.insert(keys(QUESTION), RULE, b"x" * 4000)  # the older, smaller answer stays
    assert cache.stats.too_large == 2
    assert cache.stats.evicted == 0
    assert await cache.lookup(keys(QUESTION), RULE, False) == Hit("exact", b"small", 1.0)
    assert isinstance(await cache.lookup(keys(TIMES_23), RULE, False), Miss)
    assert embedder.calls == [QUESTION]  # no embedding for an answer not kept
    assert len(cache) == 1


async def test_an_entry_evicted_by_the_whole_cache_bound_leaves_the_index(clock: Clock) -> None:
    cache = AnswerCache(crowded(), clock, bounds=CacheBounds(max_entries=2))
    await insert(cache, NEAR[0])
    assert isinstance(await cache.lookup(keys(QUESTION), RULE, semantic=True), Hit)
    await insert(cache, UNRELATED, tenant="globex")
    await insert(cache, TIMES_23, tenant="initech")  # acme's NEAR[0] is the oldest: it goes
    assert isinstance(await cache.lookup(keys(QUESTION), RULE, semantic=True), Miss)
    assert cache.searchable == len(cache) == 2
    assert cache.stats.evicted == 1


async def test_restore_keeps_the_most_recently_used_within_the_bounds(clock: Clock) -> None:
    cache = AnswerCache(None, clock)
    for tenant in ("t1", "t2", "t3", "t4", "t5"):
        await store(cache, tenant, size=1000)
    assert await held(cache, "t1")
    assert await held(cache, "t3")
    saved = cache.entries()
    assert tenants(cache) == ["t2", "t4", "t5", "t1", "t3"]

    fewer = AnswerCache(None, clock, bounds=CacheBounds(max_entries=3))
    fewer.restore(saved)
    assert tenants(fewer) == ["t5", "t1", "t3"]
    assert fewer.stats.evicted == 2

    lighter = AnswerCache(None, clock, bounds=CacheBounds(max_bytes=2 * footprint(saved[0])))
    lighter.restore([*saved, Entry(0, keys("q", tenant="t6"), b"x" * 10**6, 0.0, 10**9)])
    assert tenants(lighter) == ["t1", "t3"]
    assert lighter.stats.too_large == 1


async def test_entries_are_least_recently_used_first_across_scopes(clock: Clock) -> None:
    cache = AnswerCache(None, clock)
    await store(cache, "t1", "a")
    await store(cache, "t2", "b")
    await store(cache, "t1", "c")
    assert await held(cache, "t1", "a")
    assert [e.keys.query for e in cache.entries()] == ["b", "c", "a"]


# --- the bounds hold whatever clients do (property tests) ----------------------------------------

# few enough keys that lookups often find what an earlier step stored
QUESTIONS = [QUESTION, PARAPHRASE, NEAR[0], TIMES_23]
SCOPES = ["t0", "t1", "t2"]
SCOPE_LIMITS = st.lists(st.integers(1, 4), min_size=len(SCOPES), max_size=len(SCOPES))
BOUNDS = st.builds(CacheBounds, st.integers(1, 8), st.integers(250, 3000))
STEPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("insert"),
            st.integers(0, len(SCOPES) - 1),
            st.integers(0, len(QUESTIONS) - 1),
            st.integers(0, 2000),
            st.booleans(),
        ),
        st.tuples(
            st.just("lookup"),
            st.integers(0, len(SCOPES) - 1),
            st.integers(0, len(QUESTIONS) - 1),
            st.booleans(),
        ),
        st.tuples(st.just("wait"), st.sampled_from([1.0, 30.0])),
        st.tuples(st.just("sweep")),
    ),
    min_size=20,
    max_size=80,
)


def consistent(cache: AnswerCache, limits: list[int]) -> None:
    """The bounds hold, and every structure agrees on which entries are live."""
    live = cache._by_id
    assert len(cache) <= cache.bounds.max_entries
    assert cache._bytes == sum(footprint(e) for e in live.values()) <= cache.bounds.max_bytes
    assert len(cache) == sum(len(scope) for scope in cache._scopes.values())
    for name, scope in cache._scopes.items():
        assert 0 < len(scope) <= limits[[keys("q", tenant=t).scope for t in SCOPES].index(name)]
        assert all(live.get(e.ident) is e and e.keys.exact == k for k, e in scope.items())
        # a scope's recency order is the whole cache's, restricted to that scope
        assert list(scope.values()) == [e for e in live.values() if e.keys.scope == name]
    vectors = {e.keys.context: e.vector for e in live.values() if e.vector is not None}
    assert set(cache._contexts) == set(vectors)
    for context, index in cache._contexts.items():
        found = index.search(vectors[context], len(index))
        mine = [
            e.ident for e in live.values() if e.keys.context == context and e.vector is not None
        ]
        assert sorted(ident for ident, _ in found) == sorted(mine)
    assert cache._judge.referenced <= set(live)


@settings(max_examples=150, deadline=None)
@given(BOUNDS, SCOPE_LIMITS, STEPS)
def test_no_sequence_of_requests_breaks_the_bounds(
    bounds: CacheBounds, limits: list[int], steps: list[tuple[Any, ...]]
) -> None:
    async def play() -> None:
        clock = Clock()
        cache = AnswerCache(crowded(), clock, bounds=bounds)
        for step in steps:
            match step:
                case ("insert", scope, question, size, semantic):
                    rule = CacheRule(ttl_s=45, max_entries=limits[scope], semantic=semantic)
                    body = answer(QUESTIONS[question]).ljust(size)
                    await cache.insert(keys(QUESTIONS[question], SCOPES[scope]), rule, body)
                case ("lookup", scope, question, semantic):
                    await cache.lookup(keys(QUESTIONS[question], SCOPES[scope]), RULE, semantic)
                case ("wait", seconds):
                    clock.now += seconds
                case _:
                    cache.sweep()
            consistent(cache, limits)

    asyncio.run(play())


@settings(max_examples=150, deadline=None)
@given(BOUNDS, SCOPE_LIMITS, STEPS)
def test_exact_answers_are_evicted_least_recently_used_first(
    bounds: CacheBounds, limits: list[int], steps: list[tuple[Any, ...]]
) -> None:
    """Against a model of the intended policy: the scope's bound, then the whole cache's, each
    evicting its least recently used; an answer alone over the byte bound is never kept."""

    async def play() -> None:
        cache = AnswerCache(None, Clock(), bounds=bounds)
        model: dict[tuple[int, int], int] = {}  # (scope, question) -> footprint, LRU first
        for step in steps:
            if step[0] == "insert":
                _, scope, question, size, _ = step
                rule = CacheRule(max_entries=limits[scope], semantic=False)
                k = keys(QUESTIONS[question], SCOPES[scope])
                await cache.insert(k, rule, answer(QUESTIONS[question]).ljust(size))
                weight = footprint(Entry(0, k, answer(QUESTIONS[question]).ljust(size), 0, 0))
                if weight <= bounds.max_bytes:
                    model.pop((scope, question), None)
                    model[(scope, question)] = weight
                    mine = [key for key in model if key[0] == scope]
                    for key in mine[: max(0, len(mine) - limits[scope])]:
                        del model[key]
                    while len(model) > bounds.max_entries or sum(model.values()) > bounds.max_bytes:
                        del model[next(iter(model))]
            elif step[0] == "lookup":
                _, scope, question, _ = step
                found = await cache.lookup(keys(QUESTIONS[question], SCOPES[scope]), RULE, False)
                assert isinstance(found, Hit) == ((scope, question) in model)
                if (scope, question) in model:
                    model[(scope, question)] = model.pop((scope, question))
            expected = [keys(QUESTIONS[q], SCOPES[s]).exact for s, q in model]
            assert [e.keys.exact for e in cache.entries()] == expected

    asyncio.run(play())


async def test_borderline_candidates_are_refereed_in_one_batch_nearest_confirmed_first() -> None:
    """Two stored questions both borderline to the asked one: the referee gets the asked
    question and both stored ones at once (one padded run in the real embedder), refuses the
    nearer and confirms the other, which is served."""
    nearer, other = "How can I reverse a list in Python?", "How would I reverse a list in Python?"
    fast = FakeEmbedder({QUESTION: VECTORS[QUESTION], nearer: around(0.93), other: around(0.92)})
    referee = FakeEmbedder(
        {QUESTION: VECTORS[QUESTION], nearer: around(0.89), other: around(0.905, toward=2)}
    )
    referee.gates[QUESTION] = asyncio.Event()
    cache = AnswerCache(fast, Clock(), referee=Referee(referee, lambda: 0.05))
    await insert(cache, nearer)
    await insert(cache, other)
    lookup = asyncio.create_task(cache.lookup(keys(QUESTION), RULE, semantic=True))
    for _ in range(20):  # the lookup runs up to the gate: no more calls come after that
        await asyncio.sleep(0)
    assert sorted(referee.calls) == sorted([QUESTION, nearer, other])  # all asked before any ends
    referee.gates[QUESTION].set()
    hit = await lookup
    assert isinstance(hit, Hit)
    assert hit.answer == answer(other)
    assert hit.similarity == pytest.approx(0.905, abs=1e-6)
    assert (cache.stats.refereed, cache.stats.overturned) == (2, 1)
