"""The pipeline's cache steps: may this request be cached, the lookup, serving a hit, keeping a
new answer once it is complete, and sharing one upstream call among identical requests.

`Answers` outlives policy reloads (the cache, the flights in the air, the embedder); what a
request may do is decided per request from the policy it started with.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from cache import persist
from cache.coalesce import Coalescer
from cache.embedder import Embedder, load_encoder, measured_shift, referee_kind
from cache.encoders import Encoder, EncoderKind, source_model
from cache.index import Vector
from cache.keys import CacheKeys, CachePlan, Sharing, cache_keys, cache_plan, model_version
from cache.referee import (
    UNMEASURED_MARGIN,
    Embeds,
    Referee,
    referee_band_below,
    referee_margin,
)
from cache.spelling import Lexicon, read_lexicon
from cache.store import AnswerCache, CacheBounds, Hit, Miss, Reading
from cache.verifier import OnnxVerifier, Verifier, Verifies, load_verifier
from cache.verifier_model import make, verifier_folder
from policies.model import CacheRule, Policy
from proxy.endpoints import ENDPOINTS
from proxy.flow.caller import OFFLOAD_PARSE_BYTES
from proxy.flow.streaming import assemble, fresh, replay
from proxy.flow.whole import Whole
from proxy.schema import ProxyRequest

log = logging.getLogger("overspill")


@dataclass(frozen=True)
class Head:
    """What precedes an answer's body: where it came from, its status and headers."""

    route: str
    status: int
    headers: list[tuple[bytes, bytes]]
    stream: bool
    # how it was produced, the same for every request sharing it (coalesced passengers too)
    queued_s: float | None = None  # time its request waited in the waiting room
    degraded: str = ""  # what was given up under pressure


Produced = tuple[Head, AsyncIterator[bytes]]
NO_KEYS = CacheKeys("", "", None, None)


@dataclass(frozen=True)
class Caching:
    """One request's cache decision and keys."""

    plan: CachePlan
    keys: CacheKeys
    rule: CacheRule
    flight: str  # requests with the same flight key may share an upstream call
    needs_usage: bool = True  # the client is told the answer's usage (not a stream without it)
    # how near a stored question was (X-Overspill-Cache-Similarity): told only to a caller with
    # a key, in its own scope (elsewhere it would say whether a planted answer took)
    tells_similarity: bool = True


def version(policy: Policy, model: str) -> str:
    """What serves a public model, as far as the policy says: a change gives new cache keys."""
    route = policy.route(model)
    parts = [f"cloud:{c}:{policy.cloud(c).model}" for c in (route.cloud if route else ())]
    for backend in policy.backends:
        if backend.models is None:
            parts.append(f"{backend.name}:{backend.url}:*")
        elif model in backend.models:
            parts.append(f"{backend.name}:{backend.url}:{backend.models[model]}")
    return model_version(parts)


class OnDemandEmbedder:
    """The embedding model, loaded in the embedder's thread when a question first needs it, so
    that a proxy whose requests are never semantically cacheable never pays for it."""

    def __init__(self, kind: EncoderKind, home: Path) -> None:
        self.kind, self.home = kind, home
        self._embedder: Embedder | None = None
        self._warming: asyncio.Task[Vector] | None = None
        self._margin = self._below = UNMEASURED_MARGIN

    @property
    def ready(self) -> bool:
        warming = self._warming
        return (
            warming is not None
            and warming.done()
            and not warming.cancelled()
            and (warming.exception() is None)
        )

    def warm(self) -> None:
        if self._embedder is None:
            self._embedder = Embedder(self._load)
            self._warming = asyncio.create_task(self._embedder.embed("warm up"))

    def margin(self) -> float:
        """How close to the threshold a similarity of this model goes to the referee: sized from
        what was measured of the model when it was made, so known once it is loaded."""
        return self._margin

    def below(self) -> float:
        """How far below the threshold the referee still looks (referee.referee_band_below)."""
        return self._below

    def _load(self) -> Encoder:
        """In the embedder's thread: the model, and what was measured of it (the model is made
        first, if it must be)."""
        encoder = load_encoder(self.kind, self.home)
        shift = measured_shift(self.kind, self.home)
        if shift is not None:
            self._margin, self._below = referee_margin(shift.max), referee_band_below(shift.max)
            log.info(
                "embedder: %s moved a similarity by up to %.4f (p99 %.4f) from its referee's "
                "on %d calibration pairs: the referee settles those from %.3f below the "
                "threshold to %.3f above",
                self.kind,
                shift.max,
                shift.p99,
                shift.pairs,
                self._below,
                self._margin,
            )
        return encoder

    async def embed(self, text: str) -> Vector:
        self.warm()
        assert self._embedder is not None
        return await self._embedder.embed(text)

    async def close(self) -> None:
        """Stop the thread; a model still loading (an export takes seconds) is not waited for."""
        if self._embedder is None:
            return
        if self.ready:
            await asyncio.to_thread(self._embedder.close)
        else:
            self._embedder.close(wait=False)


def embedders(kind: EncoderKind, home: Path) -> tuple[OnDemandEmbedder, Referee | None]:
    """The embedder the policy names, and the reference model that settles its borderline
    similarities when it is not the reference itself."""
    fast, refereed_by = OnDemandEmbedder(kind, home), referee_kind(kind)
    referee = (
        Referee(OnDemandEmbedder(refereed_by, home), fast.margin, fast.below)
        if refereed_by
        else None
    )
    return fast, referee


def encoder_lexicon() -> Lexicon:
    """The words typos are mended toward: the embedding model's own vocabulary (every encoder
    kind is all-MiniLM-L6-v2's, so one file serves them all). Reads ~30,000 lines: ms."""
    return read_lexicon(source_model() / "vocab.txt")


def _usage_asked(request: ProxyRequest) -> bool:
    options = request.body.get("stream_options")
    return isinstance(options, dict) and bool(options.get("include_usage"))


def on_demand_verifier(home: Path) -> Verifier:
    """The answer verifier, loaded in its own thread with the embedder; made there first (in a
    child process, minutes) if this home has none yet: until then, no semantic hits."""

    def load() -> OnnxVerifier:
        folder = verifier_folder(home)
        make(folder)
        return load_verifier(folder)

    return Verifier(load)


@dataclass
class Answers:
    embedder: Embeds | None = None
    referee: Referee | None = None
    verifier: Verifies | None = None
    bounds: CacheBounds = field(default_factory=CacheBounds)  # the whole cache, every scope
    lexicon: Lexicon | None = None  # to mend typos before embedding (cache/spelling.py)
    cache: AnswerCache = field(init=False)
    coalescer: Coalescer[Head] = field(default_factory=Coalescer)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    _saving: asyncio.Lock = field(default_factory=asyncio.Lock)

    def __post_init__(self) -> None:
        self.cache = AnswerCache(
            self.embedder,
            referee=self.referee,
            bounds=self.bounds,
            verifier=self.verifier,
            lexicon=self.lexicon,
        )

    async def caching(
        self,
        policy: Policy,
        request: ProxyRequest,
        level: str,
        tenant: str,
        cache_control: str,
        sharing: Sharing | None = None,
    ) -> Caching:
        rule = policy.cache_rule(request.model)
        level_cache = policy.privacy.level(level).cache
        endpoint = ENDPOINTS[request.endpoint].caching
        sharing = sharing or Sharing()
        plan = cache_plan(
            endpoint, request.body, rule, level_cache, bool(tenant), cache_control, sharing
        )
        if not policy.cache.enabled:
            plan = CachePlan(False, False, False, plan.coalesce, "cache disabled")
        if not (plan.lookup or plan.store or plan.coalesce):
            return Caching(plan, NO_KEYS, rule, "")  # the common bypass costs no hashing
        keying = (
            request.endpoint,
            request.body,
            tenant,
            request.model,
            version(policy, request.model),
        )
        # a digest of the whole body (sorted JSON): ~30 ms at 4 MB, so off the loop when long
        if request.size < OFFLOAD_PARSE_BYTES:
            keys = cache_keys(*keying)
        else:
            keys = await asyncio.to_thread(cache_keys, *keying)
        if not sharing.semantic(rule):  # neither found by a similar question nor embedded
            keys = dataclasses.replace(keys, context=None, query=None)
        delivery = orjson.dumps([request.stream, request.body.get("stream_options")])
        flight = f"{keys.exact}:{level}:{delivery.decode()}"
        needs_usage = not request.stream or _usage_asked(request)
        return Caching(plan, keys, rule, flight, needs_usage, sharing.keyed)

    async def lookup(self, caching: Caching) -> Hit | Miss | Reading:
        """The cache's answer, or a lookup the answer verifier is reading (AnswerCache.begin)."""
        if not caching.plan.lookup:
            return Miss()
        return await self.cache.begin(
            caching.keys, caching.rule, caching.plan.semantic, caching.needs_usage
        )

    def serve_hit(self, hit: Hit, request: ProxyRequest, caching: Caching) -> Produced:
        completion = fresh(hit.answer)
        headers = []
        if hit.kind == "semantic" and hit.similarity is not None and caching.tells_similarity:
            headers.append((b"x-overspill-cache-similarity", f"{hit.similarity:.4f}".encode()))
        if request.stream:
            chunks = replay(completion, _usage_asked(request))
            headers.append((b"content-type", b"text/event-stream"))
            return Head("cache", 200, headers, True), _iterate(chunks)
        headers.append((b"content-type", b"application/json"))
        return Head("cache", 200, headers, False), Whole(orjson.dumps(completion))

    def keep(
        self, caching: Caching, produced: Produced, miss: Miss, personal: bool = False
    ) -> Produced:
        """Pass the answer through; once it is complete and good, store it off the hot path
        (`personal`: for the same request only, the exact layer)."""
        head, chunks = produced
        if not caching.plan.store or head.status != 200:
            return produced
        if personal:
            keys = dataclasses.replace(caching.keys, context=None, query=None)
            caching, miss = dataclasses.replace(caching, keys=keys), Miss()
        if isinstance(chunks, Whole):  # complete already
            insert = self.cache.insert(caching.keys, caching.rule, chunks.body, miss.vector)
            self._background(insert)
            return produced

        async def kept() -> AsyncIterator[bytes]:
            parts = []
            async with contextlib.aclosing(chunks):  # type: ignore[type-var]
                async for chunk in chunks:
                    parts.append(chunk)
                    yield chunk
            self._background(self._kept(caching, miss, parts, head.stream))

        return head, kept()

    async def _kept(self, caching: Caching, miss: Miss, parts: list[bytes], stream: bool) -> None:
        """Store a passed answer, a stream assembled first: in a worker thread (linear, but a
        long answer's thousands of events are milliseconds), after the client has it all."""
        if not stream:
            await self.cache.insert(caching.keys, caching.rule, b"".join(parts), miss.vector)
            return
        assembled = await asyncio.to_thread(_assembled, parts)
        if assembled is not None:
            answer, unknown = assembled
            await self.cache.insert(caching.keys, caching.rule, answer, miss.vector, unknown)

    def shared(
        self, caching: Caching, produce: Callable[[], Awaitable[Produced]]
    ) -> AbstractAsyncContextManager[Produced]:
        """The answer, from an identical request's upstream call when one is in flight."""
        if not caching.plan.coalesce:
            return _Produced(produce)
        return self._boarded(caching, produce)

    @contextlib.asynccontextmanager
    async def _boarded(
        self, caching: Caching, produce: Callable[[], Awaitable[Produced]]
    ) -> AsyncIterator[Produced]:
        async with self.coalescer.board(caching.flight, produce) as flight:
            head = await flight.wait_head()
            yield head, flight.follow()

    def _background(self, work: Awaitable[None]) -> None:
        async def run() -> None:
            try:
                await work
            except Exception:  # a cache that cannot store is a miss next time, not an outage
                log.exception("cache insert failed")

        task = asyncio.create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def open(self, path: Path | None) -> None:
        """Restore the saved cache, if any (read in a thread: it may be large)."""
        if path is not None:
            self.cache.restore(await asyncio.to_thread(persist.load, path))
            log.info("cache: %d answers restored from %s", len(self.cache), path)

    async def keep_saved(self, path: Path, interval_s: float) -> None:
        """Save the cache every interval_s when it changed (a task; cancelled at shutdown)."""
        saved = self.cache.changes
        while True:
            await asyncio.sleep(interval_s)
            self.cache.sweep()
            if self.cache.changes != saved:
                saved = self.cache.changes
                await self.save(path)

    async def save(self, path: Path) -> None:
        """One save at a time: a cancelled caller does not stop the thread writing the file."""
        try:
            async with self._saving:
                await asyncio.to_thread(persist.save, self.cache.entries(), path)
        except Exception as error:  # a full disk (or a bug) must not take the proxy down
            log.warning("cache: cannot save to %s: %s", path, error)

    async def settle(self, grace_s: float | None = None) -> None:
        """Wait for the answers still being stored (at shutdown, and in tests), at most grace_s:
        at shutdown, an answer waiting for a model still loading is saved without its vector
        (an exact entry) rather than holding the shutdown for the model."""
        async with asyncio.timeout(grace_s):
            while self._tasks:
                await asyncio.wait(self._tasks)

    async def close(self) -> None:
        """Stop the embedding threads (after settle(): an insert may still be embedding). The
        verifier's are daemons: one making its model leaves that to its child, which finishes
        it for the next start."""
        for model in (self.embedder, self.referee.embeds if self.referee else None):
            if isinstance(model, OnDemandEmbedder):
                await model.close()


@dataclass
class _Produced:
    """The answer produced for this request alone (no flight to share): a class, not a
    generator-based context manager, as most requests take this way."""

    produce: Callable[[], Awaitable[Produced]]

    async def __aenter__(self) -> Produced:
        return await self.produce()

    async def __aexit__(self, *exc: object) -> None:
        return None


async def _iterate(chunks: list[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


def _assembled(parts: list[bytes]) -> tuple[bytes, bool] | None:
    """A stream's completion, and whether it lacks usage; None if it is not one to keep."""
    answer = assemble(parts)
    return None if answer is None else (answer, not orjson.loads(answer).get("usage"))
