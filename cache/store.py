"""Answers already given: the exact layer, then the semantic layer, with TTL and LRU per scope.

A scope is one tenant's public model at one version: entries never cross it, and its size is
bounded by the route's `max_entries` (least recently used evicted first). Scopes come from what
clients send (a tenant name, a model), so the whole cache has bounds of its own too, in entries
and in bytes: past either, the least recently used entry of any scope goes. Semantic search runs
only among entries of the same context (scope, parameters, every message but the last user one),
and which of the nearest questions' answers, if any, answers the one asked is the judges' call
(cache/judge.py: the guard, the referee, the answer verifier). Lookups and inserts run on the
event loop; the embedding runs in the embedder's thread, and a large index is built in a worker
thread (cache/index.py: search and eviction cost the same at any size).

The fast embedder (int8) places a similarity within a known margin of the reference model's: the
export measures how far it strays on the CPU that serves, and `referee_margin` adds headroom. A
candidate that close to the threshold is settled by the referee, the reference model, so that
the cache serves exactly the hits the reference would: the fast path decides the clear cases
(most lookups), the slow one only the borderline few. With the verifier the threshold only
picks the candidate it reads, so the proxy runs no referee then (proxy/services.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from cache.index import EXACT_UP_TO, Build, Vector, VectorIndex
from cache.judge import Candidate, Judge, ToVerify
from cache.keys import CacheKeys
from cache.referee import Embeds, Referee
from cache.spelling import ContextWords, Lexicon
from cache.stats import CacheStats
from cache.verifier import Verifies
from policies.model import CacheRule

log = logging.getLogger("overspill")

CANDIDATES = 4  # nearest entries checked by the guard before giving up


@dataclass(frozen=True)
class CacheBounds:
    """What the whole cache may hold, across every scope."""

    max_entries: int = 100_000
    max_bytes: int = 256 * 1024 * 1024  # as counted by `footprint`

    def __post_init__(self) -> None:
        # a bound below one entry would refuse everything, or evict what was just stored
        if self.max_entries < 1 or self.max_bytes < 1:
            raise ValueError(f"cache bounds must be positive: {self}")


@dataclass(frozen=True)
class Entry:
    ident: int
    keys: CacheKeys
    answer: bytes  # the complete answer as a non-streamed JSON body
    created: float  # wall-clock seconds, so that TTLs hold across a restart
    expires: float
    vector: Vector | None = None
    # Assembled from a stream whose client did not ask for usage: the answer cannot say how
    # many tokens it used, so it serves only clients that are not told (cache.lookup).
    usage_unknown: bool = False


def footprint(entry: Entry) -> int:
    """An entry's weight against `CacheBounds.max_bytes`: its answer and its key strings (UTF-8),
    what a client controls the size of. Its vector and the bookkeeping around it are a fixed
    cost per entry, which `max_entries` bounds."""
    keys = entry.keys
    strings = (keys.scope, keys.exact, keys.context or "", keys.query or "")
    return len(entry.answer) + sum(len(text.encode()) for text in strings)


@dataclass(frozen=True)
class Hit:
    kind: Literal["exact", "semantic"]
    answer: bytes
    similarity: float | None = None


@dataclass(frozen=True)
class Miss:
    vector: Vector | None = None  # the question's embedding, to store with its answer
    refused: str = ""  # why the guard refused a similar entry, if it did


@dataclass(frozen=True, eq=False)
class Reading:
    """A semantic lookup whose nearest candidate the answer verifier is reading: the question's
    vector (stored with its answer if it turns out a miss) and the outcome to come, which a
    caller may race against the engine (proxy/flow/speculation.py). Cancelling the outcome
    makes the lookup a miss; a reading not yet begun is then never run."""

    vector: Vector
    outcome: asyncio.Future[Hit | Miss]
    stats: CacheStats  # its cache's

    def drop(self) -> None:
        """The engine's answer came first: the reading is dropped (never run if it had not
        begun), and the lookup is a miss."""
        if self.outcome.cancel():
            self.stats.misses += 1
            self.stats.overtaken += 1


@dataclass
class AnswerCache:
    embedder: Embeds | None
    clock: Callable[[], float] = time.time
    stats: CacheStats = field(default_factory=CacheStats)
    referee: Referee | None = None  # None: the embedder is the reference
    bounds: CacheBounds = CacheBounds()
    exact_up_to: int = EXACT_UP_TO  # vectors a context's index holds before it is approximate
    verifier: Verifies | None = None  # None: a similar question the guard accepts is served
    lexicon: Lexicon | None = None  # typos mended before embedding (None: embedded as asked)

    def __post_init__(self) -> None:
        self._words = ContextWords(self.lexicon) if self.lexicon is not None else None
        self._judge = Judge(self.stats, self.referee, self.verifier, self.lexicon)
        self._scopes: dict[str, OrderedDict[str, Entry]] = {}
        self._contexts: dict[str, VectorIndex] = {}
        # every entry, least recently used first whatever its scope: the global eviction order
        # (each scope's own order is this one restricted to it, as both move together). An
        # OrderedDict finds its first item at once; a dict scans the slots its evictions emptied.
        self._by_id: OrderedDict[int, Entry] = OrderedDict()
        self._bytes = 0  # sum of the entries' footprints
        self._ids = itertools.count(1)
        self._builds: set[asyncio.Task[None]] = set()  # indexes being built in worker threads
        self.changes = 0  # how many times entries were added or dropped: is a save due?

    def __len__(self) -> int:
        return len(self._by_id)

    @property
    def searchable(self) -> int:
        """Entries the semantic layer can find (their question is embedded)."""
        return sum(len(index) for index in self._contexts.values())

    async def lookup(
        self, keys: CacheKeys, rule: CacheRule, semantic: bool, needs_usage: bool = False
    ) -> Hit | Miss:
        """`needs_usage`: the client must be told the answer's usage (a whole answer, or a stream
        that asked for it), so an answer without it is no hit: its own answer replaces it."""
        found = await self.begin(keys, rule, semantic, needs_usage)
        if isinstance(found, Reading):
            return await found.outcome  # cancelled with this lookup (a task awaited directly)
        return found

    async def begin(
        self, keys: CacheKeys, rule: CacheRule, semantic: bool, needs_usage: bool = False
    ) -> Hit | Miss | Reading:
        """`lookup`, up to the answer verifier: a lookup that needs its reading comes back as a
        Reading at once, the reading under way."""
        entry = self._live(keys.scope, keys.exact) if rule.exact else None
        if entry is not None and needs_usage and entry.usage_unknown:
            entry = None
        if entry is not None:
            self.stats.hits_exact += 1
            return Hit("exact", entry.answer, 1.0)
        if not (semantic and self.embedder and keys.context and keys.query):
            self.stats.misses += 1
            return Miss()
        if not self.embedder.ready:  # a miss now beats a request held for seconds
            self.warm()
            self.stats.misses += 1
            return Miss()
        vector = await self.embedder.embed(self._embeddable(keys))
        found = await self._similar(keys, vector, rule.threshold, needs_usage)
        if isinstance(found, ToVerify):
            reading = asyncio.ensure_future(self._read(found, keys, vector))
            return Reading(vector, reading, self.stats)
        return self._counted(found, vector)

    async def _read(self, reading: ToVerify, keys: CacheKeys, vector: Vector) -> Hit | Miss:
        chosen = await self._judge.verified(reading, keys.query or "", self._holds, keys.scope)
        return self._counted(self._served(chosen), vector)

    def _counted(self, found: Hit | str, vector: Vector) -> Hit | Miss:
        if isinstance(found, Hit):
            self.stats.hits_semantic += 1
            return found
        self.stats.misses += 1
        return Miss(vector, found)

    def warm(self) -> None:
        """Start loading the semantic layer's models (in their own threads), if not yet done."""
        if self.embedder is not None:
            self.embedder.warm()
        if self.referee is not None:
            self.referee.embeds.warm()
        if self.verifier is not None:
            self.verifier.warm()

    async def _similar(
        self, keys: CacheKeys, vector: Vector, threshold: float, needs_usage: bool = False
    ) -> Hit | str | ToVerify:
        """The nearest entry of the same context that is similar enough and that every judge
        accepts (cache/judge.py); else why a similar one was refused ("" when none was); or,
        with the verifier, the candidates left for it to read."""
        index = self._contexts.get(keys.context or "")
        if index is None:
            return ""
        nearest = index.search(vector, CANDIDATES)  # ~0.1-0.3 ms at any size (cache/index.py)
        self._maintain(keys.context or "", index)
        candidates = []
        for ident, similarity in nearest:
            entry = self._by_id.get(ident)
            if not self._judge.in_reach(similarity, threshold) or entry is None:
                continue
            if entry.keys.query is None or self._expired(entry):
                continue
            if not (needs_usage and entry.usage_unknown):
                candidates.append(Candidate(ident, entry.keys.query, similarity))
        chosen = await self._judge.screened(candidates, keys.query or "", threshold, self._holds)
        return chosen if isinstance(chosen, ToVerify) else self._served(chosen)

    def _served(self, chosen: Candidate | str) -> Hit | str:
        """The chosen candidate's answer, if its entry is still stored; else why not."""
        if isinstance(chosen, str):
            return chosen
        entry = self._by_id.get(chosen.ident)
        if entry is None:  # evicted while a judge read it
            return ""
        self._touch(entry)
        return Hit("semantic", entry.answer, chosen.similarity)

    def _holds(self, ident: int) -> bool:
        return ident in self._by_id

    def _embeddable(self, keys: CacheKeys) -> str:
        """The question as embedded: its typos mended toward its context's words (the guard and
        the verifier read it as asked)."""
        question = keys.query or ""
        return self._words.spelled(keys.context or "", question) if self._words else question

    async def insert(
        self,
        keys: CacheKeys,
        rule: CacheRule,
        answer: bytes,
        vector: Vector | None = None,
        usage_unknown: bool = False,
    ) -> None:
        """Keep a complete answer: in the exact layer at once, in the semantic one as soon as
        its question is embedded (when the lookup did not do it already)."""
        now = self.clock()
        semantic = rule.semantic and keys.context is not None and keys.query is not None
        entry = Entry(
            next(self._ids),
            keys,
            answer,
            now,
            now + rule.ttl_s,
            vector if semantic else None,
            usage_unknown,
        )
        if not self._store(entry):
            return
        self.stats.stored += 1
        # the scope's own bound first: what it evicts may bring the whole cache within its own
        self._bound(keys.scope, rule.max_entries)
        self._trim()
        if semantic and vector is None and self.embedder is not None:
            vector = await self.embedder.embed(self._embeddable(keys))
            if self._by_id.get(entry.ident) is entry:  # still there after the wait
                self.add(dataclasses.replace(entry, vector=vector))

    def _bound(self, scope_key: str, max_entries: int) -> None:
        scope = self._scopes[scope_key]
        while len(scope) > max_entries:
            _, oldest = scope.popitem(last=False)
            self._forget(oldest)
            self.stats.evicted += 1

    def _trim(self) -> None:
        """Evict the least recently used entries of any scope until the whole cache is within
        its bounds (never the newest: `_store` refused any entry that alone exceeds them)."""
        while len(self._by_id) > self.bounds.max_entries or self._bytes > self.bounds.max_bytes:
            self._remove(next(iter(self._by_id.values())))
            self.stats.evicted += 1

    def add(self, entry: Entry) -> None:
        """Add an entry as it is, as the most recently used (also how a saved cache is
        restored), within the whole cache's bounds."""
        if self._store(entry):
            self._trim()

    def _store(self, entry: Entry, maintain: bool = True) -> bool:
        """Keep an entry, replacing any of the same key; False if it alone exceeds the byte
        bound (any older answer to the same question stays). `maintain`: start a build of its
        context's index if one is due."""
        size = footprint(entry)
        if size > self.bounds.max_bytes:
            self.stats.too_large += 1
            return False
        scope = self._scopes.setdefault(entry.keys.scope, OrderedDict())
        previous = scope.pop(entry.keys.exact, None)
        if previous is not None:
            self._forget(previous)
        scope[entry.keys.exact] = entry
        self._by_id[entry.ident] = entry
        self._bytes += size
        self.changes += 1
        if entry.vector is not None and entry.keys.context is not None:
            index = self._contexts.get(entry.keys.context)
            if index is None:
                index = VectorIndex(len(entry.vector), self.exact_up_to)
                self._contexts[entry.keys.context] = index
            index.add(entry.ident, entry.vector)
            if maintain:
                self._maintain(entry.keys.context, index)
            if self._words is not None:
                self._words.add(entry.ident, entry.keys.context, entry.keys.query or "")
        return True

    @property
    def building(self) -> int:
        """Indexes being built in worker threads now."""
        return len(self._builds)

    @property
    def approximate(self) -> int:
        """Contexts whose index is an inverted file (cache/index.py)."""
        return sum(index.approximate for index in self._contexts.values())

    async def built(self) -> None:
        """Wait for the indexes being built in worker threads."""
        while self._builds:
            await asyncio.gather(*self._builds)

    def _maintain(self, context: str, index: VectorIndex) -> None:
        """Start building the context's index anew in a worker thread when it is due (never
        outside the event loop: a cache restored before it runs builds at its first use)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        build = index.build_due()
        if build is not None:
            task = loop.create_task(self._build(context, index, build))
            self._builds.add(task)
            task.add_done_callback(self._builds.discard)

    async def _build(self, context: str, index: VectorIndex, build: Build) -> None:
        installed = False
        try:
            built = await asyncio.to_thread(build.run)
            if self._contexts.get(context) is index:  # not emptied and dropped meanwhile
                index.install(built)
                installed = True
        except Exception:  # the exact or older structure goes on answering
            log.exception("cache: building an index of %d questions failed", len(build.ids))
        finally:
            if not installed:
                index.abandon()

    def entries(self) -> list[Entry]:
        """Every live entry, least recently used first (to save them): restored in this order,
        the cache evicts what it would have evicted before the restart."""
        now = self.clock()
        return [e for e in self._by_id.values() if e.expires > now]

    def restore(self, entries: list[Entry]) -> None:
        """Entries saved by `entries`, then each context's index built once, from all its
        questions (in a running loop; else at its first lookup). Built as they came, a build
        from the first `exact_up_to` questions had the rest replayed one by one on the loop and
        was rebuilt at the first lookup: at 100,000, ~3 s of both cores under the first
        requests after a restart. With questions to search, the models start loading too: the
        first lookups after a restart are misses until they are ready."""
        for entry in entries:
            if self._store(dataclasses.replace(entry, ident=next(self._ids)), maintain=False):
                self._trim()
        for context, index in self._contexts.items():
            self._maintain(context, index)
        if self._contexts:  # questions to search: the models load now, not at the first lookup
            self.warm()

    def sweep(self) -> int:
        """Drop the expired entries (lookups drop those they meet; this finds the others)."""
        now = self.clock()
        expired = [e for scope in self._scopes.values() for e in scope.values() if e.expires <= now]
        for entry in expired:
            self._remove(entry)
        self.stats.expired += len(expired)
        return len(expired)

    def _live(self, scope: str, exact: str) -> Entry | None:
        entries = self._scopes.get(scope)
        entry = entries.get(exact) if entries else None
        if entry is None or self._expired(entry):
            return None
        self._touch(entry)
        return entry

    def _touch(self, entry: Entry) -> None:
        """Make a live entry the most recently used, in its scope and in the whole cache."""
        self._scopes[entry.keys.scope].move_to_end(entry.keys.exact)
        self._by_id.move_to_end(entry.ident)

    def _expired(self, entry: Entry) -> bool:
        if entry.expires > self.clock():
            return False
        self._remove(entry)
        self.stats.expired += 1
        return True

    def _remove(self, entry: Entry) -> None:
        scope = self._scopes.get(entry.keys.scope)
        if scope is not None and scope.get(entry.keys.exact) is entry:
            del scope[entry.keys.exact]
            if not scope:
                del self._scopes[entry.keys.scope]
        self._forget(entry)

    def _forget(self, entry: Entry) -> None:
        kept = self._by_id.pop(entry.ident, None)
        if kept is not None:
            self._bytes -= footprint(kept)
        self._judge.forget(entry.ident)
        if self._words is not None:
            self._words.drop(entry.ident)
        self.changes += 1
        if entry.vector is not None and entry.keys.context is not None:
            index = self._contexts.get(entry.keys.context)
            if index is not None:
                index.remove(entry.ident)
                if not len(index):
                    del self._contexts[entry.keys.context]
