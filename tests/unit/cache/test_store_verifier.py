"""cache/store.py with the answer verifier: a similar question is served only when the verifier
agrees its answer answers the one asked; clear misses never reach it; no verdict is no hit.

The verifier is a fake whose scores the test sets; the real one is tested in
tests/integration/cache/test_verifier.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
import pytest

from cache.referee import Referee
from cache.spelling import lexicon_of
from cache.store import AnswerCache, Hit, Miss, Reading
from cache.verifier import AGREES
from tests.unit.cache.test_store import (
    PARAPHRASE,
    QUESTION,
    RULE,
    UNRELATED,
    VECTORS,
    Clock,
    FakeEmbedder,
    around,
    insert,
    keys,
)

SECOND = "How could I reverse a Python list?"  # 0.998 from PARAPHRASE: the nearest candidate


class FakeVerifier:
    def __init__(self, scores: dict[str, float], ready: bool = True) -> None:
        self.scores_of = scores  # by stored question; the asked one is recorded
        self.ready = ready
        self.warmed = 0
        self.calls: list[tuple[str, list[str]]] = []
        self.failure: Exception | None = None
        self.gate: asyncio.Event | None = None
        self.entered = asyncio.Event()  # a read has begun
        self.answered = asyncio.Event()  # a read has given its scores

    def warm(self) -> None:
        self.warmed += 1

    async def scores(self, question: str, stored: Sequence[str], scope: str = "") -> np.ndarray:
        self.calls.append((question, list(stored)))
        self.entered.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.failure is not None:
            raise self.failure
        self.answered.set()
        return np.array([self.scores_of[text] for text in stored], dtype=np.float32)


def verified_cache(verifier: FakeVerifier) -> AnswerCache:
    vectors = {**VECTORS, SECOND: around(0.93)}
    return AnswerCache(FakeEmbedder(vectors), Clock(), verifier=verifier)


async def test_a_similar_question_is_served_when_the_verifier_agrees() -> None:
    verifier = FakeVerifier({QUESTION: 0.97})
    cache = verified_cache(verifier)
    await insert(cache, QUESTION)
    found = await cache.lookup(keys(PARAPHRASE), RULE, semantic=True)
    assert isinstance(found, Hit)
    assert found.kind == "semantic"
    assert verifier.calls == [(PARAPHRASE, [QUESTION])]
    assert cache.stats.verified == 1
    assert cache.stats.disagreed == 0


async def test_a_similar_question_the_verifier_turns_down_is_a_miss() -> None:
    verifier = FakeVerifier({QUESTION: AGREES - 0.01})
    cache = verified_cache(verifier)
    await insert(cache, QUESTION)
    found = await cache.lookup(keys(PARAPHRASE), RULE, semantic=True)
    assert isinstance(found, Miss)
    assert found.refused.startswith("the verifier")
    assert found.vector is not None  # the new answer is stored under the question asked
    assert cache.stats.disagreed == 1
    assert cache.stats.hits_semantic == 0


async def test_only_the_nearest_similar_candidate_is_read() -> None:
    """Where the nearest similar question is another question, a farther one is not read (each
    read costs two model runs): a miss, never a wrong answer."""
    verifier = FakeVerifier({SECOND: 0.1, QUESTION: 0.9})
    cache = verified_cache(verifier)
    await insert(cache, QUESTION)
    await insert(cache, SECOND)
    assert isinstance(await cache.lookup(keys(PARAPHRASE), RULE, semantic=True), Miss)
    assert verifier.calls == [(PARAPHRASE, [SECOND])]  # the nearest, 0.998 from the question
    assert cache.stats.verified == 1
    assert cache.stats.disagreed == 1
    verifier.scores_of[SECOND] = 0.9
    found = await cache.lookup(keys(PARAPHRASE), RULE, semantic=True)
    assert isinstance(found, Hit)
    assert b"How could I" in found.answer


async def test_a_clear_miss_never_reaches_the_verifier() -> None:
    verifier = FakeVerifier({QUESTION: 1.0})
    cache = verified_cache(verifier)
    await insert(cache, QUESTION)
    assert isinstance(await cache.lookup(keys(UNRELATED), RULE, semantic=True), Miss)
    assert verifier.calls == []
    assert cache.stats.verified == 0


async def test_the_guard_refuses_before_the_verifier_is_asked() -> None:
    stored, asked = "What is 17 times 23?", "What is 17 times 24?"
    verifier = FakeVerifier({stored: 1.0})
    cache = verified_cache(verifier)
    await insert(cache, stored)
    found = await cache.lookup(keys(asked), RULE, semantic=True)
    assert isinstance(found, Miss)
    assert found.refused.startswith("numbers differ")
    assert verifier.calls == []


async def test_without_a_verdict_there_is_no_hit() -> None:
    """Still loading: a miss, and loading starts; broken: a miss, never an error."""
    loading = FakeVerifier({QUESTION: 1.0}, ready=False)
    cache = verified_cache(loading)
    await insert(cache, QUESTION)
    assert isinstance(await cache.lookup(keys(PARAPHRASE), RULE, semantic=True), Miss)
    assert loading.warmed >= 1
    assert loading.calls == []
    assert cache.stats.unverified == 1

    broken = FakeVerifier({QUESTION: 1.0})
    broken.failure = RuntimeError("the model is gone")
    cache = verified_cache(broken)
    await insert(cache, QUESTION)
    assert isinstance(await cache.lookup(keys(PARAPHRASE), RULE, semantic=True), Miss)
    assert cache.stats.unverified == 1
    assert cache.stats.hits_semantic == 0


async def test_an_entry_evicted_while_the_verifier_reads_is_not_served() -> None:
    verifier = FakeVerifier({QUESTION: 1.0})
    verifier.gate = asyncio.Event()
    cache = verified_cache(verifier)
    await insert(cache, QUESTION)
    lookup = asyncio.create_task(cache.lookup(keys(PARAPHRASE), RULE, semantic=True))
    await verifier.entered.wait()
    assert cache.sweep() == 0
    cache._remove(cache.entries()[0])  # evicted (as by another request) during the read
    verifier.gate.set()
    assert isinstance(await lookup, Miss)


async def test_the_embedder_warms_the_verifier_with_it() -> None:
    verifier = FakeVerifier({}, ready=False)
    cache = AnswerCache(FakeEmbedder(ready=False), Clock(), verifier=verifier)
    assert isinstance(await cache.lookup(keys(QUESTION), RULE, semantic=True), Miss)
    assert verifier.warmed == 1


@pytest.mark.parametrize("referee_says", [0.91, 0.85])
async def test_a_refereed_candidate_reaches_the_verifier_only_past_the_threshold(
    referee_says: float,
) -> None:
    """Referee and verifier together (an admin's choice): the referee settles the borderline
    similarity first; only a candidate it puts past the threshold is read."""
    borderline = "How do I reverse a list in Python, please?"
    fast = FakeEmbedder({**VECTORS, borderline: around(0.92)})
    reference = FakeEmbedder({QUESTION: VECTORS[QUESTION], borderline: around(referee_says)})
    verifier = FakeVerifier({QUESTION: 1.0})
    referee = Referee(reference, margin=lambda: 0.05)
    cache = AnswerCache(fast, Clock(), referee=referee, verifier=verifier)
    await insert(cache, QUESTION)
    found = await cache.lookup(keys(borderline), RULE, semantic=True)
    assert isinstance(found, Hit) == (referee_says >= RULE.threshold)
    assert len(verifier.calls) == (1 if referee_says >= RULE.threshold else 0)


TYPO = "How do I revrse a list in Python?"


def mending_cache(verifier: FakeVerifier, *lexicon: str) -> tuple[AnswerCache, FakeEmbedder]:
    embedder = FakeEmbedder({**VECTORS, TYPO: around(0.5, toward=2)})
    words = ["how", "do", "list", "in", "python", "reverse", "revise", *lexicon]
    return AnswerCache(embedder, Clock(), verifier=verifier, lexicon=lexicon_of(words)), embedder


async def test_a_typo_is_mended_for_the_search_and_read_as_asked_by_the_verifier() -> None:
    verifier = FakeVerifier({QUESTION: 0.97})
    cache, embedder = mending_cache(verifier)
    await insert(cache, QUESTION)
    found = await cache.lookup(keys(TYPO), RULE, semantic=True)
    assert isinstance(found, Hit)
    assert embedder.calls[-1] == QUESTION  # "revrse" embedded as the stored "reverse"
    assert verifier.calls == [(TYPO, [QUESTION]), (QUESTION, [QUESTION])]  # typed, corrected
    assert cache.stats.corrected == 1


async def test_a_typed_near_miss_is_refused_when_its_corrected_reading_disagrees() -> None:
    """The verifier agrees with the typed question, but reads the corrected one ("list" for
    "lsit") as another: both readings must agree."""
    typed = "How do I reverse a lsit in Python?"

    class Typos(FakeVerifier):
        async def scores(self, question: str, stored: Sequence[str], scope: str = "") -> np.ndarray:
            found = await super().scores(question, stored)
            return found if question == typed else found * 0

    verifier = Typos({QUESTION: 0.97})
    cache, _ = mending_cache(verifier)
    await insert(cache, QUESTION)
    assert isinstance(await cache.lookup(keys(typed), RULE, semantic=True), Miss)
    assert verifier.calls == [(typed, [QUESTION]), (QUESTION, [QUESTION])]
    assert (cache.stats.disagreed, cache.stats.corrected) == (1, 1)


async def test_the_verifier_still_refuses_what_a_mended_typo_brings() -> None:
    verifier = FakeVerifier({QUESTION: AGREES - 0.01})
    cache, _ = mending_cache(verifier)
    await insert(cache, QUESTION)
    assert isinstance(await cache.lookup(keys(TYPO), RULE, semantic=True), Miss)


async def test_without_a_lexicon_a_typo_is_embedded_as_typed() -> None:
    verifier = FakeVerifier({QUESTION: 0.97})
    cache = AnswerCache(
        FakeEmbedder({**VECTORS, TYPO: around(0.5, toward=2)}), Clock(), verifier=verifier
    )
    await insert(cache, QUESTION)
    assert isinstance(await cache.lookup(keys(TYPO), RULE, semantic=True), Miss)
    assert verifier.calls == []


async def test_typos_are_mended_toward_the_words_of_live_entries_only() -> None:
    """Before the question with "reverse" is stored in this context and once it is gone,
    "revrse" is embedded as typed: no stored word is one edit away, and the lexicon ("revise")
    is never a source of words (cache/spelling.py)."""
    verifier = FakeVerifier({QUESTION: 0.97})
    cache, embedder = mending_cache(verifier)
    await insert(cache, QUESTION, tenant="other")  # another scope: another context
    assert isinstance(await cache.lookup(keys(TYPO), RULE, semantic=True), Miss)
    assert embedder.calls[-1] == TYPO
    await insert(cache, QUESTION)
    assert isinstance(await cache.lookup(keys(TYPO), RULE, semantic=True), Hit)
    cache._remove(next(e for e in cache.entries() if e.keys.scope == keys(QUESTION).scope))
    assert isinstance(await cache.lookup(keys(TYPO), RULE, semantic=True), Miss)
    assert embedder.calls[-1] == TYPO


async def test_a_typo_does_not_hide_a_critical_difference_from_the_guard() -> None:
    """ "witout" is no word the guard's tables know; corrected, it is "without": refused before
    the verifier (which typos can fool) is asked."""
    stored, typed = "What dishes can I make with an oven?", "what dishes can i make witout an oven"
    verifier = FakeVerifier({stored: 0.97})
    vectors = {stored: VECTORS[QUESTION], typed: VECTORS[PARAPHRASE]}
    lexicon = lexicon_of(["what", "dishes", "make", "with", "without", "oven"])
    cache = AnswerCache(FakeEmbedder(vectors), Clock(), verifier=verifier, lexicon=lexicon)
    await insert(cache, stored)
    found = await cache.lookup(keys(typed), RULE, semantic=True)
    assert isinstance(found, Miss)
    assert found.refused.startswith("negation differs")
    assert verifier.calls == []
    unguarded = AnswerCache(FakeEmbedder(vectors), Clock(), verifier=verifier)
    await insert(unguarded, stored)
    assert isinstance(await unguarded.lookup(keys(typed), RULE, semantic=True), Hit)


async def begun(verifier: FakeVerifier) -> tuple[AnswerCache, Reading]:
    """A cache holding QUESTION, and a lookup of its paraphrase begun: its reading under way."""
    cache = verified_cache(verifier)
    await insert(cache, QUESTION)
    found = await cache.begin(keys(PARAPHRASE), RULE, semantic=True)
    assert isinstance(found, Reading)
    return cache, found


async def test_a_lookup_the_verifier_must_read_comes_back_at_once_with_its_reading() -> None:
    verifier = FakeVerifier({QUESTION: 0.97})
    verifier.gate = asyncio.Event()
    cache, found = await begun(verifier)
    assert found.vector is not None  # stored with the engine's answer, if it turns out a miss
    await verifier.entered.wait()
    assert not found.outcome.done()
    verifier.gate.set()
    outcome = await found.outcome
    assert isinstance(outcome, Hit)
    assert cache.stats.hits_semantic == 1


async def test_a_reading_dropped_before_it_began_is_a_miss_never_read() -> None:
    verifier = FakeVerifier({QUESTION: 0.97})
    cache, found = await begun(verifier)
    found.drop()  # the engine's answer came first
    await asyncio.sleep(0)
    assert verifier.calls == []  # the reading never ran
    assert (cache.stats.misses, cache.stats.overtaken, cache.stats.hits_semantic) == (1, 1, 0)
    found.drop()  # once only
    assert cache.stats.overtaken == 1
