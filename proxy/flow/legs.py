"""The legs a request can travel: a local engine or a cloud target, behind one protocol.

The pipeline tries the targets of a plan in order and asks each one's leg, never its kind: may
this request travel it (the privacy re-check), what it holds while it runs (in-flight counts),
what it waits for first (a local engine's prefill of the same prompt), and the answer. Adding an
engine kind or a cloud kind touches this module, not the pipeline.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol

from policies.decide import Target
from policies.model import Policy, Tenant
from policies.redaction import NotRedactable, redacted_body
from proxy.errors import UpstreamUnavailable
from proxy.flow.affinity import Prompt
from proxy.flow.runtime import Runtime
from proxy.legs.answer import Answer
from proxy.legs.restored import RestoredAnswer
from proxy.schema import ProxyRequest


class Leg(Protocol):
    def may_carry(self, level: str, target: Target, request: ProxyRequest | None = None) -> bool:
        """Whether a request of this privacy level may travel to `target` (and, given the
        request, whether this one may: a level that leaves only redacted needs text that can
        all be redacted)."""
        ...

    def hold(self, target: Target, request: ProxyRequest) -> AbstractContextManager[None]:
        """Held from the moment the target is chosen until its answer is consumed."""
        ...

    def prefilling(
        self, target: Target, prompt: Prompt, stream: bool
    ) -> AbstractAsyncContextManager[None]:
        """Around the attempts: waits for, or leads, a prefill of the same prompt there."""
        ...

    async def open(
        self,
        target: Target,
        request: ProxyRequest,
        request_id: str,
        tenant: Tenant | None,
        level: str,
    ) -> Answer:
        """One try: the answer's head (a stream's body still to come), or an UpstreamError."""
        ...


@dataclass
class LocalLeg:
    """The team's own engines, through the one engine client."""

    policy: Policy
    runtime: Runtime
    auth: dict[str, dict[str, str]] = field(init=False)

    def __post_init__(self) -> None:
        self.auth = {
            backend.name: {"authorization": f"Bearer {os.environ.get(backend.api_key_env, '')}"}
            for backend in self.policy.backends
            if backend.api_key_env
        }

    def may_carry(self, level: str, target: Target, request: ProxyRequest | None = None) -> bool:
        return True  # local engines are where every level may go

    @contextlib.contextmanager
    def hold(self, target: Target, request: ProxyRequest) -> Iterator[None]:
        with self.runtime.backends.in_flight(target.name, request.token_estimate):
            self.runtime.room.started(request.model)  # the waiting room's drain rate
            yield

    @contextlib.asynccontextmanager
    async def prefilling(self, target: Target, prompt: Prompt, stream: bool) -> AsyncIterator[None]:
        affinity, balancing = self.runtime.affinity, self.policy.balancing
        led = await affinity.enter(target.name, prompt, balancing, can_lead=stream)
        try:
            yield
        finally:
            affinity.leave(target.name, led)

    async def open(
        self,
        target: Target,
        request: ProxyRequest,
        request_id: str,
        tenant: Tenant | None,
        level: str,
    ) -> Answer:
        backend = self.runtime.backends[target.name].config
        headers = {
            "content-type": "application/json",
            "x-request-id": request_id,
            **self.auth.get(backend.name, {}),
        }
        body = request.upstream_body(target.upstream_model)
        url = backend.url + request.path
        try:
            return await self.runtime.upstream.open(
                backend.name, url, body, headers, request.stream
            )
        except UpstreamUnavailable as error:
            self.runtime.backends[target.name].mark_down(error.message)
            self.runtime.affinity.index.forget(target.name)  # a restarted engine holds no prefix
            raise


@dataclass
class CloudLeg:
    """Hosted models through litellm (proxy/legs/cloud.py): the tenant's spend is charged as the
    answer is priced."""

    policy: Policy
    runtime: Runtime

    def may_carry(self, level: str, target: Target, request: ProxyRequest | None = None) -> bool:
        privacy = self.policy.privacy
        if not privacy.level(level).allows(target.name):
            return False
        if request is None or not privacy.level(level).redact:
            return True
        try:
            redacted_body(request.body, privacy.detectors)
        except NotRedactable:
            return False
        return True

    def hold(self, target: Target, request: ProxyRequest) -> AbstractContextManager[None]:
        return contextlib.nullcontext()

    def prefilling(
        self, target: Target, prompt: Prompt, stream: bool
    ) -> AbstractAsyncContextManager[None]:
        return contextlib.nullcontext()

    async def open(
        self,
        target: Target,
        request: ProxyRequest,
        request_id: str,
        tenant: Tenant | None,
        level: str,
    ) -> Answer:
        def charge(usd: float) -> None:
            self.runtime.gate.spend(tenant, usd)

        privacy = self.policy.privacy
        placeholders = None
        if privacy.level(level).redact:  # may_carry saw it could all be redacted
            body, placeholders = redacted_body(request.body, privacy.detectors)
            request = dataclasses.replace(request, body=body)
        cloud = self.policy.cloud(target.name)
        unlisted = self.policy.server.unlisted_params
        answer: Answer = await self.runtime.cloud.open(
            cloud, request, request_id, charge, unlisted, privacy.send_user
        )
        return answer if placeholders is None else RestoredAnswer(answer, placeholders)


def legs(policy: Policy, runtime: Runtime) -> dict[str, Leg]:
    """The leg of each target kind (policies.decide.Target.kind)."""
    return {"local": LocalLeg(policy, runtime), "cloud": CloudLeg(policy, runtime)}
