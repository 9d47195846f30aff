"""Whether a stored answer answers the question asked: the similar candidates a lookup found
(cache/store.py), judged cheapest first, and the nearest that every judge accepts chosen.

- The guard (cache/guard.py, microseconds) refuses a candidate that differs in something
  critical ("5 miles" vs "50 miles"), reading the pair as typed and again with typos corrected
  (cache/spelling.py), so that "witout" does not hide a "without".
- The referee, without the verifier: a similarity within the int8 encoder's measured error of
  the threshold is settled by the reference model (cache/referee.py).
- The answer verifier (cache/verifier.py), when there is one: it reads the nearest candidate
  beside the question, and again with typos corrected when there were any; both readings must
  agree that its answer answers the question ("a good book on X" is not "a good course on X").

A candidate evicted while a judge read it is never chosen. What each judge did is counted in
the cache's stats.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from cache.guard import conflict
from cache.index import Vector
from cache.referee import Embeds, Referee, settled
from cache.spelling import Lexicon, corrected
from cache.stats import CacheStats
from cache.verifier import AGREES, Crowded, Scores, Verifies

log = logging.getLogger("overspill")

# Similar candidates the answer verifier reads per lookup, nearest first: each costs one fp32
# run (10-12 ms here), two when the first agrees, and where the nearest is another question a
# farther one rarely is the same (on distinct templated questions at 100,000 entries, reading
# up to 4 served 53 of 400 neighbours' answers, reading 1 fewer); a paraphrase it misses is a
# miss, not a wrong answer.
VERIFIED_CANDIDATES = 1

Pair = tuple[str, str]  # (the stored question, the question asked)


@dataclass(frozen=True)
class Candidate:
    """A stored question near the one asked: its entry's id, its text, and how similar it is
    (the fast encoder's cosine, or the referee's once it settled it)."""

    ident: int
    question: str
    similarity: float


@dataclass(frozen=True)
class ToVerify:
    """What the guard and the referee left for the verifier: the candidates to read, nearest
    first, with their pairs with typos corrected (None: none), and why a nearer one was refused
    ("" when none was)."""

    similar: tuple[Candidate, ...]
    corrections: Mapping[int, Pair | None]
    refused: str


@dataclass
class Judge:
    stats: CacheStats
    referee: Referee | None = None  # None: the embedder is the reference
    verifier: Verifies | None = None  # None: a similar question the guard accepts is served
    lexicon: Lexicon | None = None  # typos corrected for the second readings (None: none)
    # the entries' reference vectors, once the referee needed them
    _reference: dict[int, Vector] = field(default_factory=dict)

    def in_reach(self, similarity: float, threshold: float) -> bool:
        """Similar enough to be judged: past the threshold, or within the referee's band."""
        return settled(similarity, threshold, *self._band()) is not False

    async def screened(
        self,
        nearest: list[Candidate],
        asked: str,
        threshold: float,
        holds: Callable[[int], bool],
    ) -> Candidate | str | ToVerify:
        """The nearest candidate every judge but the verifier accepts (`holds`: its entry is
        still stored), when there is no verifier; else why a similar one was refused ("" when
        none was similar); else the candidates left for the verifier to read (`verified`), a
        reading its caller may race against the engine."""
        refused = ""
        similar: list[Candidate] = []  # past the threshold, nearest first
        borderline: list[Candidate] = []  # for the referee, nearest first
        corrections: dict[int, Pair | None] = {}  # by entry: the pair with typos corrected
        band = self._band()
        # most similar first: a clear one precedes any borderline
        verdicts = [(c, settled(c.similarity, threshold, *band)) for c in nearest]
        in_reach = [(candidate, verdict) for candidate, verdict in verdicts if verdict is not False]
        # The guard first: far cheaper than the referee, but it reads whole texts (up to
        # cache.keys.MAX_QUESTION_CHARS each, twice): off the event loop, all in one hop.
        objections = await self._objections([c.question for c, _ in in_reach], asked)
        for (candidate, verdict), (reason, pair) in zip(in_reach, objections, strict=True):
            corrections[candidate.ident] = pair
            if reason is not None:
                refused = refused or reason
                self.stats.refused += 1
            elif verdict is True and self.verifier is None:
                return candidate
            else:
                (similar if verdict is True else borderline).append(candidate)
        if borderline:
            similar += await self._refereed(borderline, threshold, asked, holds)
        if not similar:
            return refused
        if self.verifier is None:
            return similar[0]
        reading = tuple(similar[:VERIFIED_CANDIDATES])
        return ToVerify(reading, {c.ident: corrections.get(c.ident) for c in reading}, refused)

    async def verified(
        self, reading: ToVerify, asked: str, holds: Callable[[int], bool], scope: str
    ) -> Candidate | str:
        """The verifier's choice among the candidates `screened` left it; else why none. It
        reads in `scope`'s turn (the cache scope asking: scopes take turns at the verifier)."""
        similar = list(reading.similar)
        try:
            agreed = await self._verified(similar, asked, reading.corrections, holds, scope)
        except Crowded as crowded:  # the scope's readings wait to the bound: a miss, unread
            self.stats.unverified += len(similar)
            return str(crowded)
        return agreed if agreed is not None else reading.refused or "the verifier: another question"

    def forget(self, ident: int) -> None:
        """An entry left the cache: its reference vector goes with it."""
        self._reference.pop(ident, None)

    @property
    def referenced(self) -> set[int]:
        """The entries whose reference vector is kept."""
        return set(self._reference)

    def _band(self) -> tuple[float, float | None]:
        referee = self.referee
        margin = referee.margin() if referee else 0.0
        below = referee.below() if referee and referee.below else None
        return margin, below

    async def _objections(
        self, stored: list[str], asked: str
    ) -> list[tuple[str | None, Pair | None]]:
        if not stored:
            return []
        return await asyncio.to_thread(lambda: [self._objection(text, asked) for text in stored])

    def _objection(self, stored: str, asked: str) -> tuple[str | None, Pair | None]:
        """The guard's objection, if any: to the questions as typed and, with a lexicon, to
        them with their typos corrected, so that "witout" does not hide a "without"; and that
        corrected pair, for the verifier's second reading (None: nothing was corrected). A
        pair with more unknown words than the correction reads is refused: a check that cannot
        read it whole does not pass it."""
        reason = conflict(stored, asked)
        if reason is not None or self.lexicon is None:
            return reason, None
        mended_stored = corrected(stored, asked, self.lexicon)
        mended_asked = corrected(asked, stored, self.lexicon)
        if mended_stored is None or mended_asked is None:
            return "too many unknown words to compare", None
        if (mended_stored, mended_asked) == (stored, asked):
            return None, None
        return conflict(mended_stored, mended_asked), (mended_stored, mended_asked)

    async def _refereed(
        self,
        borderline: list[Candidate],
        threshold: float,
        asked: str,
        holds: Callable[[int], bool],
    ) -> list[Candidate]:
        """The borderline candidates that the reference model puts at or above the threshold,
        nearest first, with the reference similarity: every vector it needs in one batch (one
        padded fp32 run)."""
        self.stats.refereed += len(borderline)
        referee = self.referee.embeds if self.referee else None
        if referee is None or not referee.ready:  # no hit beats a guess, or a request held
            if referee is not None:  # while the model loads
                referee.warm()
            self.stats.unrefereed += len(borderline)
            return []
        try:
            question, *stored = await asyncio.gather(
                referee.embed(asked),
                *(
                    _embedded(referee, candidate.question, self._reference.get(candidate.ident))
                    for candidate in borderline
                ),
            )
        except Exception:  # a broken referee is a miss, not an error
            log.exception("cache: the reference embedder failed")
            self.stats.unrefereed += len(borderline)
            return []
        similar = []
        for candidate, vector in zip(borderline, stored, strict=True):
            if not holds(candidate.ident):  # evicted during the wait
                continue
            self._reference[candidate.ident] = vector
            reference = float(question @ vector)
            if (reference >= threshold) != (candidate.similarity >= threshold):
                self.stats.overturned += 1
            if reference >= threshold:
                similar.append(Candidate(candidate.ident, candidate.question, reference))
        return sorted(similar, key=lambda candidate: -candidate.similarity)

    async def _verified(
        self,
        similar: list[Candidate],
        asked: str,
        corrections: Mapping[int, Pair | None],
        holds: Callable[[int], bool],
        scope: str,
    ) -> Candidate | None:
        """The nearest candidate whose answer the verifier agrees answers the question: all of
        them in one batch, and again with typos corrected (`corrections`, by entry). No verdict
        (the model still loading, or failed) is no hit."""
        verifier = self.verifier
        assert verifier is not None
        if not verifier.ready:
            verifier.warm()
            self.stats.unverified += len(similar)
            return None
        try:
            scores = await self._scores(asked, [candidate.question for candidate in similar], scope)
            agreed = [
                score >= AGREES
                and await self._agrees_corrected(corrections.get(candidate.ident), scope)
                for candidate, score in zip(similar, scores, strict=True)
            ]
        except Crowded:
            raise
        except Exception:  # a broken verifier is a miss, not an error
            log.exception("cache: the answer verifier failed")
            self.stats.unverified += len(similar)
            return None
        self.stats.verified += len(similar)
        self.stats.disagreed += agreed.count(False)
        for candidate, agrees in zip(similar, agreed, strict=True):
            if agrees and holds(candidate.ident):  # not evicted
                return candidate
        return None

    async def _agrees_corrected(self, pair: Pair | None, scope: str) -> bool:
        """The verifier's second reading, of the (stored, asked) questions with their typos
        corrected, when there were any: it learnt typos as a sign of a paraphrase (the tuning
        half typed in a hurry, `bench.cache_truth --typos`: 1 of 192 near-misses served on one
        reading, none on both). Both readings must agree."""
        if pair is None or self.verifier is None:
            return True
        self.stats.corrected += 1
        (score,) = await self._scores(pair[1], [pair[0]], scope)
        return bool(score >= AGREES)

    async def _scores(self, question: str, stored: list[str], scope: str) -> Scores:
        """The verifier's reading, in the scope's turn."""
        assert self.verifier is not None
        return await self.verifier.scores(question, stored, scope)


async def _embedded(embeds: Embeds, text: str, known: Vector | None) -> Vector:
    return known if known is not None else await embeds.embed(text)
