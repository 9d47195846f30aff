"""The legs a request can travel: a local engine or a cloud target, behind one protocol.

The pipeline tries the targets of a plan in order and asks each one's leg, never its kind: may
this request travel it, and as what (the privacy re-check: the names model reads what would
leave, a redacting level redacts it), what it holds while it runs (in-flight counts, a cloud
call's reservation of its tenant's budget), what it waits for first (a local engine's prefill of
the same prompt), and the answer. Adding an engine kind or a cloud kind touches this module, not
the pipeline.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from policies.decide import Target
from policies.entities import ENTITY_DETECTORS, Found
from policies.model import CloudTarget, Policy, Tenant
from policies.payload import payload_of
from policies.privacy import Classification, names_redacted, raised
from policies.redaction import NotRedactable, Placeholders, redacted_body
from proxy.errors import UpstreamNotConnected
from proxy.flow.affinity import Prefill, Prompt
from proxy.flow.gate import Reservation
from proxy.flow.runtime import Runtime
from proxy.legs.answer import Answer
from proxy.legs.cloud_wire import open_wire
from proxy.legs.restored import RestoredAnswer
from proxy.schema import ProxyRequest


@dataclass(frozen=True)
class Cleared:
    """What a target may be sent: the request as it travels there (redacted where its level
    says so, with the placeholders to restore in the answer), or None and why not."""

    request: ProxyRequest | None
    why_not: str = ""
    placeholders: Placeholders | None = None

    def refusal(self, level: str, target: Target) -> str:
        """Why `target` may not take the request, for the reasons and the client's error."""
        why = f" ({self.why_not})" if self.why_not else ""
        return f"privacy={level}: {target.name} may not take it{why}"


Redaction = tuple[dict[str, Any], Placeholders] | str  # the body redacted, or why it cannot be
_T = TypeVar("_T")
# Clearing a request for a cloud (texts normalised, the redaction) costs up to ~2.4 us a byte of
# a small body on hostile text (U+FDFA, near-miss digits; 4 us a byte at 4 KB), so from this
# size it runs in a worker thread (a hop costs ~50 us): at most ~0.6 ms on the loop.
CLEAR_INLINE_BYTES = 256


@dataclass
class Screening:
    """The names model's findings on one request, once, for the first cloud target it would
    leave for (a local answer never pays for it); its redaction, once for every target."""

    held: tuple[str, ...] = ()  # quasi-identifiers found alone: they count if a name is found
    found: Found | None = None
    raised: Classification | None = None  # the level it found, when stricter than the request's
    redaction: tuple[dict[str, Any], Redaction] | None = None  # the body it was made from, too

    async def once(self, screen: Callable[[], Awaitable[Found]]) -> Found:
        if self.found is None:
            self.found = await screen()
        return self.found

    async def redacted(
        self, body: dict[str, Any], redact: Callable[[], Awaitable[Redaction]]
    ) -> Redaction:
        if self.redaction is None or self.redaction[0] is not body:
            self.redaction = (body, await redact())
        return self.redaction[1]


class Leg(Protocol):
    def may_carry(self, level: str, target: Target) -> bool:
        """Whether a request of this privacy level may travel to `target` (the plan's rule)."""
        ...

    async def clear(
        self, target: Target, request: ProxyRequest, level: str, screening: Screening
    ) -> Cleared:
        """Just before the request would go: may this one travel there, and as what (the
        privacy re-check, where the detectors too slow for every request run)."""
        ...

    def hold(
        self, target: Target, request: ProxyRequest, tenant: Tenant | None
    ) -> AbstractContextManager[Reservation | None]:
        """Held from the moment the target is chosen until its answer is consumed; a cloud
        call's entered value is its reservation of the tenant's budget, which its cost settles
        (proxy/flow/gate.OverBudget raised when the call may not start)."""
        ...

    def prefilling(
        self, target: Target, prompt: Prompt, stream: bool
    ) -> AbstractAsyncContextManager[None]:
        """Around the attempts: waits for, or leads, a prefill of the same prompt there."""
        ...

    async def open(
        self, target: Target, cleared: Cleared, request_id: str, held: Reservation | None
    ) -> Answer:
        """One try with what `clear` allowed (`held`: what `hold` entered): the answer's head
        (a stream's body still to come), or an UpstreamError."""
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

    def may_carry(self, level: str, target: Target) -> bool:
        return True  # local engines are where every level may go

    async def clear(
        self, target: Target, request: ProxyRequest, level: str, screening: Screening
    ) -> Cleared:
        return Cleared(request)

    def hold(
        self, target: Target, request: ProxyRequest, tenant: Tenant | None
    ) -> AbstractContextManager[None]:
        self.runtime.room.started(request.model)  # the waiting room's drain rate
        return self.runtime.backends.in_flight(target.name, request.token_estimate)

    def prefilling(
        self, target: Target, prompt: Prompt, stream: bool
    ) -> AbstractAsyncContextManager[None]:
        return Prefill(self.runtime.affinity, target.name, prompt, self.policy.balancing, stream)

    async def open(
        self, target: Target, cleared: Cleared, request_id: str, held: Reservation | None
    ) -> Answer:
        request = cleared.request
        assert request is not None  # the chain opens only what was cleared
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
        except UpstreamNotConnected as error:
            # Down only when no connection could be made: a pooled connection the engine had
            # just closed (its keep-alive ran out as we wrote) says nothing of the engine, and
            # marking it down would turn every request away until the next probe.
            self.runtime.backends[target.name].mark_down(error.message)
            self.runtime.affinity.index.forget(target.name)  # a restarted engine holds no prefix
            raise


@dataclass
class CloudLeg:
    """Hosted models through litellm (proxy/legs/cloud.py): the call reserves the most it may
    cost against its tenant's budget, and its price, once known, settles the reservation."""

    policy: Policy
    runtime: Runtime

    def may_carry(self, level: str, target: Target) -> bool:
        return self.policy.privacy.level(level).allows(target.name)

    async def clear(
        self, target: Target, request: ProxyRequest, level: str, screening: Screening
    ) -> Cleared:
        """The level may reach the target; then the names model reads what would leave (when
        the policy maps its detectors) and may raise the level; a redacting level sends the
        request redacted, or not at all if it cannot all be (or the model did not read it)."""
        privacy = self.policy.privacy
        if not self.may_carry(level, target):
            return Cleared(None)
        found = Found()
        if wanted := [*(n for n in ENTITY_DETECTORS if n in privacy.detectors), *screening.held]:
            found = await screening.once(lambda: self._screen(request, wanted))
            level_now = raised(privacy, level, found)
            if level_now.reasons:
                screening.raised = level_now
            if not self.may_carry(level_now.level, target):
                return Cleared(None, f"privacy={level_now.level} ({level_now.why})")
            level = level_now.level
        if not privacy.level(level).redact:
            return Cleared(request)
        redaction = await screening.redacted(request.body, lambda: self._redact(request, found))
        if isinstance(redaction, str):
            return Cleared(None, f"privacy={level} leaves only redacted: {redaction}")
        body, places = redaction
        return Cleared(dataclasses.replace(request, body=body), placeholders=places)

    async def _screen(self, request: ProxyRequest, wanted: list[str]) -> Found:
        """The texts as the detectors read them (normalised off the loop when long), then the
        names model's findings, worked out in its own thread."""
        payload = await _off_loop(request, lambda: payload_of(request.body))
        privacy, ner = self.policy.privacy, self.runtime.ner
        return await ner.screen(payload, wanted, privacy.scan_timeout_s, names_redacted(privacy))

    async def _redact(self, request: ProxyRequest, found: Found) -> Redaction:
        if found.unchecked:  # names the model did not read are not known, so not redacted
            return "; ".join(found.reason(name) for name in found.unchecked)
        detectors = self.policy.privacy.detectors

        def redact() -> Redaction:
            try:
                return redacted_body(request.body, detectors, values=found.values)
            except NotRedactable as why:
                return str(why)

        return await _off_loop(request, redact)

    def hold(
        self, target: Target, request: ProxyRequest, tenant: Tenant | None
    ) -> AbstractContextManager[Reservation]:
        """Reserved when the chain reaches this target, not at planning: a plan may list a
        cloud after local targets that answer, and the worst case depends on the target."""
        cloud, clouds = self.policy.cloud(target.name), self.runtime.cloud
        return self.runtime.gate.reserved(tenant, lambda: clouds.worst_case(cloud, request))

    def prefilling(
        self, target: Target, prompt: Prompt, stream: bool
    ) -> AbstractAsyncContextManager[None]:
        return contextlib.nullcontext()

    async def open(
        self, target: Target, cleared: Cleared, request_id: str, held: Reservation | None
    ) -> Answer:
        request = cleared.request
        assert request is not None  # the chain opens only what was cleared
        assert held is not None  # and what hold() reserved
        held.renew()  # a retry after a charged try reserves again
        cloud = self.policy.cloud(target.name)
        answer = await self._call(cloud, request, request_id, held)
        places = cleared.placeholders
        return answer if places is None else RestoredAnswer(answer, places)

    async def _call(
        self, cloud: CloudTarget, request: ProxyRequest, request_id: str, held: Reservation
    ) -> Answer:
        """The call, by the target's wire: litellm, or OpenAI's format relayed as bytes. Its
        cost settles the tenant's reservation."""
        unlisted = self.policy.server.unlisted_params
        send_user = self.policy.privacy.send_user
        clouds = self.runtime.cloud
        if not cloud.speaks_openai:
            return await clouds.open(cloud, request, request_id, held.charge, unlisted, send_user)

        def charge(usd: float) -> None:
            clouds.spent += usd
            held.charge(usd)

        def price(prompt: int, completion: int) -> float:
            return clouds.price(cloud, prompt, completion)

        upstream = self.runtime.upstream
        try:
            return await open_wire(
                upstream, cloud, request, request_id, price, charge, unlisted, send_user
            )
        except asyncio.CancelledError:
            # The client left while the provider worked: charged the most it could have cost
            # (the provider may generate, and bill, the whole answer), as on litellm's path.
            charge(clouds.worst_case(cloud, request))
            raise


async def _off_loop(request: ProxyRequest, work: Callable[[], _T]) -> _T:
    """`work` done on the loop for a short body, in a worker thread for a long one."""
    if request.size < CLEAR_INLINE_BYTES:
        return work()
    return await asyncio.to_thread(work)


def legs(policy: Policy, runtime: Runtime) -> dict[str, Leg]:
    """The leg of each target kind (policies.decide.Target.kind)."""
    return {"local": LocalLeg(policy, runtime), "cloud": CloudLeg(policy, runtime)}
