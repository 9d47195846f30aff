"""The request path, top to bottom: plan, open the first target that answers, relay.

Steps still to come plug in here, in this order (docs/design.md): admission, cache lookup,
coalescing, the cloud leg, retries and breakers.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass

from policies.decide import RoutingPlan, Target, decide
from policies.model import Policy
from proxy.backends import Backends
from proxy.errors import ModelNotFound, NoBackend, UpstreamError, UpstreamUnavailable
from proxy.reply import Reply
from proxy.schema import ProxyRequest
from proxy.upstream import Upstream, UpstreamResponse


@dataclass
class Pipeline:
    policy: Policy
    backends: Backends
    upstream: Upstream
    rng: random.Random

    def __post_init__(self) -> None:
        self._auth = {
            backend.name: {"authorization": f"Bearer {os.environ.get(backend.api_key_env, '')}"}
            for backend in self.policy.backends
            if backend.api_key_env
        }

    def plan(self, request: ProxyRequest) -> RoutingPlan:
        snapshot = self.backends.snapshot()
        if not snapshot.serving(request.model):
            known = ", ".join(snapshot.public_models()) or "none"
            raise ModelNotFound(
                f"The model `{request.model}` does not exist. Available: {known}", param="model"
            )
        return decide(request.model, snapshot, self.rng)

    async def run(self, request: ProxyRequest, reply: Reply, request_id: str) -> None:
        plan = self.plan(request)
        reply.reasons = plan.reasons
        failures = list(plan.reasons[1:])
        for target in plan.targets:
            with self.backends.in_flight(target.backend):
                try:
                    upstream = await self._open(request, target, request_id)
                except UpstreamUnavailable as error:
                    # Nothing was sent anywhere yet: mark it down and try the next backend.
                    self.backends[target.backend].mark_down(error.message)
                    failures.append(error.message)
                    continue
                await reply.relay(upstream, target.route)
                return
        why = "; ".join(failures) or plan.why_none
        raise NoBackend(f"no backend can serve model {request.model!r} now: {why}")

    async def _open(
        self, request: ProxyRequest, target: Target, request_id: str
    ) -> UpstreamResponse:
        backend = self.backends[target.backend].config
        headers = {
            "content-type": "application/json",
            "x-request-id": request_id,
            **self._auth.get(backend.name, {}),
        }
        try:
            return await self.upstream.open(
                backend.name,
                backend.url + request.path,
                request.upstream_body(target.upstream_model),
                headers,
                request.stream,
            )
        except UpstreamError as error:
            error.headers.setdefault("X-Overspill-Route", target.route)
            raise
