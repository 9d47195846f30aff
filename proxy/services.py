"""The one object the app's lifespan builds and every handler reads: no globals, no singletons."""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field

from policies.model import Policy
from policies.watcher import PolicyWatcher
from proxy.backends import Backends
from proxy.cloud import Cloud
from proxy.pipeline import Pipeline
from proxy.upstream import Upstream


@dataclass
class Services:
    policy: Policy
    upstream: Upstream
    backends: Backends
    pipeline: Pipeline
    started: float = field(default_factory=time.monotonic)
    watcher: PolicyWatcher | None = None

    @classmethod
    async def start(cls, policy: Policy) -> Services:
        upstream = Upstream(policy.timeouts)
        backends = Backends(policy.backends, upstream, policy.server.probe_interval_s)
        await backends.start()
        cloud = Cloud()
        if policy.clouds:
            # `import litellm` takes seconds: pay it at start, not on the first overflow.
            await asyncio.to_thread(lambda: cloud.litellm)
        pipeline = Pipeline(policy, backends, upstream, cloud, random.Random())
        return cls(policy, upstream, backends, pipeline)

    def apply(self, policy: Policy) -> None:
        """Swap in a validated policy. Requests already running keep the pipeline they hold."""
        old = self.pipeline
        self.backends.reconfigure(policy.backends, policy.server.probe_interval_s)
        self.upstream.timeouts = policy.timeouts
        breakers = {
            name: breaker
            for name, breaker in old.breakers.items()
            if breaker.settings == policy.breaker
        }
        self.pipeline = Pipeline(policy, self.backends, self.upstream, old.cloud, old.rng,
                                 breakers, dict(old.saturated))  # fmt: skip
        self.policy = policy

    async def stop(self) -> None:
        await self.backends.stop()
        await self.upstream.close()
