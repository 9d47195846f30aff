"""The one object the app's lifespan builds and every handler reads: no globals, no singletons."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from cache.store import CacheBounds
from policies.budget import Spend
from policies.model import Policy
from policies.watcher import PolicyWatcher
from proxy import extras
from proxy.flow import ledger as spend_ledger
from proxy.flow.caching import Answers, embedders, encoder_lexicon, on_demand_verifier
from proxy.flow.pipeline import Pipeline
from proxy.flow.runtime import Runtime
from proxy.home import overspill_home
from proxy.legs.backends import Backends
from proxy.legs.cloud import Cloud
from proxy.legs.upstream import Upstream

log = logging.getLogger("overspill")


@dataclass
class Services:
    policy: Policy
    runtime: Runtime
    pipeline: Pipeline
    started: float = field(default_factory=time.monotonic)
    watcher: PolicyWatcher | None = None
    saver: asyncio.Task[None] | None = None
    bookkeeper: asyncio.Task[None] | None = None  # saves the cloud spend ledger
    cache_path: Path | None = None  # where the cache was restored from, and is saved to

    @classmethod
    async def start(cls, policy: Policy) -> Services:
        upstream = Upstream(policy.timeouts)
        backends = Backends(policy.backends, upstream, policy.server.probe_interval_s)
        await backends.start()
        cloud = Cloud()
        if policy.clouds:
            # `import litellm` takes seconds: pay it at start, not on the first overflow.
            await asyncio.to_thread(lambda: cloud.litellm)
        answers = _answers(policy)
        path = _cache_path(policy)
        await answers.open(path)
        runtime = Runtime(backends, upstream, cloud, answers=answers)
        if extras.needs_names(policy):
            # The names model: seconds to load, so at start, in its own thread. If it cannot
            # load, what it would read counts as found (fail closed): the proxy still serves.
            try:
                await asyncio.wrap_future(runtime.ner.load())
            except Exception:
                log.exception("the names model did not load: person and medical count as found")
        pipeline = Pipeline(policy, runtime)
        services = cls(policy, runtime, pipeline, cache_path=path)
        if path is not None:
            services.saver = asyncio.create_task(
                answers.keep_saved(path, policy.cache.save_interval_s)
            )
        ledger = spend_ledger.spend_path(policy)
        if ledger is not None:
            runtime.gate.restore(await asyncio.to_thread(spend_ledger.load, ledger))
            services.bookkeeper = asyncio.create_task(services.keep_ledger(ledger))
        return services

    async def keep_ledger(self, path: Path) -> None:
        """Save the cloud spend a moment after it changes (a task; cancelled at shutdown)."""
        saved = self.runtime.gate.ledger
        while True:
            await asyncio.sleep(_LEDGER_INTERVAL_S)
            ledger = self.runtime.gate.ledger
            if ledger != saved:
                await self._save_ledger(path, ledger)
                saved = ledger

    async def _save_ledger(self, path: Path, ledger: dict[str, Spend]) -> None:
        try:
            await asyncio.to_thread(spend_ledger.save, ledger, path)
        except OSError as error:  # a full disk must not take the proxy down
            log.warning("cannot save the spend ledger to %s: %s", path, error)

    def apply(self, policy: Policy) -> None:
        """Swap in a validated policy. Requests already running keep the pipeline they hold."""
        runtime = self.runtime
        runtime.backends.reconfigure(policy.backends, policy.server.probe_interval_s)
        runtime.upstream.timeouts = policy.timeouts
        runtime.answers.cache.bounds = cache_bounds(policy)  # applied from the next insert
        if extras.needs_names(policy):
            runtime.ner.load()  # in its thread; requests that cannot wait for it stay local
        breakers = {
            name: breaker
            for name, breaker in self.pipeline.breakers.items()
            if breaker.settings == policy.breaker
        }
        self.pipeline = Pipeline(policy, runtime, breakers)
        self.policy = policy

    async def stop(self) -> None:
        for task in (self.saver, self.bookkeeper):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        ledger = spend_ledger.spend_path(self.policy)
        if ledger is not None:
            await self._save_ledger(ledger, self.runtime.gate.ledger)
        answers = self.runtime.answers
        with contextlib.suppress(TimeoutError):
            await answers.settle(grace_s=_SETTLE_S)
        if self.cache_path is not None:
            await answers.save(self.cache_path)
        await answers.close()
        await self.runtime.room.close()
        await self.runtime.backends.stop()
        await self.runtime.upstream.close()
        self.runtime.ner.close()


_LEDGER_INTERVAL_S = 1.0  # spend is money: saved within a second of changing
_SETTLE_S = 2.0  # answers being stored: ms each, unless the embedding model is still loading


def _answers(policy: Policy) -> Answers:
    """The answer cache, with the semantic layer when the policy wants it and it is installed."""
    if not policy.cache.enabled:
        return Answers(bounds=cache_bounds(policy))
    missing = extras.semantic_missing(policy, extras.installed())
    if missing:
        log.warning("overspill: semantic cache off, exact cache only: %s", missing)
        return Answers(bounds=cache_bounds(policy))
    home = overspill_home()
    embedder, referee = embedders(policy.cache.embedder, home)
    if not policy.cache.verifier:
        return Answers(embedder, referee, bounds=cache_bounds(policy))
    # With the verifier, the threshold only picks the candidates it reads: where exactly the
    # fast model places a similarity no longer decides a hit, so no referee needs to settle it.
    # Typos are mended only then: a mended word may bring a candidate, the verifier decides.
    return Answers(
        embedder, None, on_demand_verifier(home), cache_bounds(policy), encoder_lexicon()
    )


def _cache_path(policy: Policy) -> Path | None:
    """Where the cache is saved (read at start: a new path in a reloaded policy waits for a
    restart, as the file in use is the one the cache was restored from)."""
    if not policy.cache.enabled or not policy.cache.path:
        return None
    return Path(policy.cache.path).expanduser()


def cache_bounds(policy: Policy) -> CacheBounds:
    return CacheBounds(policy.cache.max_total_entries, policy.cache.max_bytes)
