"""The request path under one policy, top to bottom: identify and admit (gate), who asks and
how private (caller), the plan (policies/decide), the cache and coalescing (caching), degrade and
the waiting room under pressure, the chain of targets (chain, legs), the reply. The hops, with
their module:function, are drawn in docs/design.md."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass, field
from types import TracebackType

from cache.keys import Sharing
from cache.store import Hit, Miss, Reading
from policies.decide import RequestFacts, RoutingPlan, decide, route_for
from policies.identity import Identity, KeyRing
from policies.load import LoadSnapshot
from policies.model import Policy
from policies.privacy import Classification
from proxy.errors import ModelNotFound
from proxy.flow.affinity import Prompt
from proxy.flow.caching import Caching, Head, Produced
from proxy.flow.caller import Caller, caller_of, read_facts, request_facts
from proxy.flow.chain import Chain, Trip
from proxy.flow.degrade import capped, smaller_model
from proxy.flow.gate import TENANT_HEADER, Ticket
from proxy.flow.legs import Screening
from proxy.flow.local_room import LocalRoom
from proxy.flow.record import Record, question_of
from proxy.flow.runtime import Runtime
from proxy.flow.speculation import ENGINE_FIRST, raced, speculates
from proxy.flow.usage import Usage, metered
from proxy.flow.waiting import Ask, Turn
from proxy.legs.breaker import Breaker
from proxy.schema import ProxyRequest


@dataclass(frozen=True)
class Asked:
    """What the path knows of a request beyond its body: who asks (class, tenant), how private
    it is, and what its prompt shares with what the replicas hold."""

    privacy: Classification
    prompt: Prompt
    caller: Caller


@dataclass
class Pipeline:
    """The request path under one policy. What outlives the policy lives in `runtime`; the
    breakers are the pipeline's own (a reload keeps those whose settings did not change)."""

    policy: Policy
    runtime: Runtime
    breakers: dict[str, Breaker] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.keys = KeyRing.of(self.policy)
        for name in [b.name for b in self.policy.backends] + [c.name for c in self.policy.clouds]:
            self.breakers.setdefault(name, Breaker(self.policy.breaker))
        self.chain = Chain(self.policy, self.runtime, self.breakers)

    def caller(self, request: ProxyRequest, headers: dict[str, str], named: str) -> Caller:
        return caller_of(self.policy, request, headers, named)

    def serves(self, model: str, snapshot: LoadSnapshot | None = None) -> bool:
        """A local backend serves the model now (in `snapshot`, if given), or a route sends it
        to a cloud."""
        if snapshot is None:
            local = self.runtime.backends.lists(model)
        else:
            local = bool(snapshot.serving(model))
        return local or bool(route_for(self.policy, model).cloud)

    def plan(self, request: ProxyRequest, asked: Asked) -> RoutingPlan:
        """The plan the request follows: it takes its round-robin turn, and its saturation
        verdicts are remembered for the next request of its model and class (hysteresis)."""
        memory = (request.model, asked.caller.priority.name)
        turn = self.runtime.affinity.turn(asked.caller.scope)
        before = self.runtime.saturated.get(memory, frozenset())
        plan = self._decided(request, asked, turn, before)
        self.runtime.saturated[memory] = plan.saturated
        return plan

    def preview(self, request: ProxyRequest, asked: Asked) -> RoutingPlan:
        """The plan as it would be now, changing nothing (explain, degrade's checks)."""
        memory = (request.model, asked.caller.priority.name)
        return self._decided(request, asked, 0, self.runtime.saturated.get(memory, frozenset()))

    def _decided(
        self, request: ProxyRequest, asked: Asked, turn: int, before: frozenset[str]
    ) -> RoutingPlan:
        snapshot = self.runtime.backends.snapshot()
        if not self.serves(request.model, snapshot):
            known = sorted({*snapshot.public_models(), *(r.model for r in self.policy.routes)})
            available = ", ".join(known) or "none"
            raise ModelNotFound(
                f"The model `{request.model}` does not exist. Available: {available}", param="model"
            )
        facts = self._facts(request, asked, turn)
        return decide(facts, self.policy, snapshot, self.runtime.rng, self._blocked(), before)

    def _facts(self, request: ProxyRequest, asked: Asked, turn: int) -> RequestFacts:
        caller = asked.caller
        budget_closed = self.runtime.gate.cloud_closed(caller.tenant)
        level, held = asked.privacy.level, asked.prompt.held
        return request_facts(request, level, caller, budget_closed, held, turn)

    def _blocked(self) -> dict[str, str]:
        """The targets whose breakers refuse a call now, with why."""
        now = self.runtime.clock.now()
        return {
            n: b.last_failure or "open" for n, b in self.breakers.items() if not b.would_allow(now)
        }

    async def explain(
        self, request: ProxyRequest, headers: dict[str, str]
    ) -> tuple[Classification, RoutingPlan]:
        """Where the request would go now, and why: the live path's own steps (caller, privacy,
        prompt, plan, and each target's last check before it would leave: the names model,
        redaction) with the live load, health, breakers and spend, changing nothing."""
        asked = await self.asked(request, headers, headers.get(TENANT_HEADER, ""))
        plan = self.preview(request, asked)
        screening, refused = Screening(held=asked.privacy.held), []
        for target in plan.targets:
            leg = self.chain.legs[target.kind]
            cleared = await leg.clear(target, request, asked.privacy.level, screening)
            if cleared.request is None:
                refused.append(cleared.refusal(asked.privacy.level, target))
        privacy = asked.privacy
        if screening.raised is not None:
            raised = screening.raised
            privacy = Classification(raised.level, (*privacy.reasons, *raised.reasons))
        return privacy, dataclasses.replace(plan, reasons=(*plan.reasons, *refused))

    async def asked(self, request: ProxyRequest, headers: dict[str, str], named: str) -> Asked:
        """Who asks, how private the request is, and what its prompt shares with the replicas:
        the same for the live path and explain."""
        caller = self.caller(request, headers, named)
        # privacy and the prompt's blocks both read the whole body: one worker-thread hop
        facts = await read_facts(self.policy, self.runtime.scans, request, headers, caller)
        balancing = self.policy.balancing
        prompt = self.runtime.affinity.prompt(request, balancing, caller.scope, facts.hashes)
        return Asked(facts.privacy, prompt, caller)

    def identify(self, headers: dict[str, str]) -> Identity:
        """Who calls (401/403 otherwise): from the headers alone, before the body is read, so an
        unknown caller costs no parsing."""
        return self.runtime.gate.identify(self.policy, self.keys, headers)

    def run(
        self,
        request: ProxyRequest,
        record: Record,
        request_id: str,
        headers: dict[str, str],
        identity: Identity,
    ) -> Answering:
        """The answer to a request (its head, then its body's chunks), while the caller
        delivers it (`async with`); what happened is noted in `record` as it goes. An error
        before the first byte is raised as an APIError. The caller's ticket and the flight are
        held until the delivery ends, so in-flight counts and a shared answer cover the whole
        of it."""
        return Answering(self, request, record, request_id, headers, identity)

    async def _produced(
        self,
        request: ProxyRequest,
        plan: RoutingPlan,
        asked: Asked,
        request_id: str,
        caching: Caching,
        found: Miss,
        screening: Screening,
    ) -> Produced:
        """The answer from the targets: degraded under pressure if the route allows, after a
        wait in the waiting room if it must; kept in the cache unless degraded."""
        job, current, degraded = self._degraded(request, plan, asked)
        queued = self.runtime.clock.now()
        turn = await self._wait_turn(job, current, asked)
        waited = None
        if turn is not None:
            waited = round(self.runtime.clock.now() - queued, 4)
            current = self.plan(job, asked)
        deadline = self.runtime.clock.now() + self._deadline(request)
        level, tenant = asked.privacy.level, asked.caller.tenant
        why = asked.privacy.why
        screening.held = asked.privacy.held
        trip = Trip(job, level, request_id, asked.prompt, tenant, deadline, why, screening)
        head, chunks = await self.chain.produce(trip, current, turn)
        if waited is not None:
            head = dataclasses.replace(head, queued_s=waited)
        if degraded:  # not the answer to the request as asked: marked, and never cached
            mark = (b"x-overspill-degraded", degraded.encode())
            return dataclasses.replace(
                head, headers=[*head.headers, mark], degraded=degraded
            ), chunks
        # the names model found someone in what left: only the same request gets this answer
        personal = bool(screening.found and screening.found.fired)
        return self.runtime.answers.keep(caching, (head, chunks), found, personal)

    def _degraded(
        self, request: ProxyRequest, plan: RoutingPlan, asked: Asked
    ) -> tuple[ProxyRequest, RoutingPlan, str]:
        """Under pressure (no local backend has room now, and the plan does not go to the
        cloud), what the route's [routes.degrade] offers instead: a smaller model whose backends
        have room, else a capped max_tokens. Else the request as it is."""
        rule = route_for(self.policy, request.model).degrade
        if not plan.pressed:
            return request, plan, ""
        offer = smaller_model(request, rule)
        if offer is not None:
            with contextlib.suppress(ModelNotFound):
                fresh = self.preview(offer[0], asked)
                if fresh.targets and not fresh.pressed:
                    return offer[0], fresh, offer[1]
        offer = capped(request, rule)
        if offer is None:
            return request, plan, ""
        return offer[0], self.preview(offer[0], asked), offer[1]

    async def _wait_turn(
        self, request: ProxyRequest, plan: RoutingPlan, asked: Asked
    ) -> Turn | None:
        """Wait in the waiting room when the plan can only send the request to a saturated
        local backend (and its class has a queue); None when it need not wait."""
        priority = asked.caller.priority
        if not plan.waits_for_local:
            return None
        if priority.max_wait_s <= 0:
            return None  # no proxy queue for this class: the engine's own queue holds it

        runtime = self.runtime
        ready = LocalRoom(
            self._facts(request, asked, 0),
            self.policy,
            runtime.backends.snapshot,
            self._blocked,
            runtime.rng,
        )
        route = route_for(self.policy, request.model)
        max_wait = min(priority.max_wait_s, route.deadline_s or priority.max_wait_s)
        priorities = self.policy.priorities
        ask = Ask(
            request.model,
            priority.name,
            priorities.rank(priority.name),
            max_wait,
            priorities.aging_s,
            request.token_estimate,
            (priority.name, asked.privacy.level),
        )
        return await self.runtime.room.wait(ask, ready)

    def _deadline(self, request: ProxyRequest) -> float:
        route = route_for(self.policy, request.model)
        return route.deadline_s or self.policy.timeouts.total_s


class Answering:
    """Pipeline.run's answer. Entered: the request is admitted (its tenant's ticket), asked
    about, planned, looked up in the cache and produced (or shared with an identical one in
    flight). Left: the flight and the ticket are released. A class, not generator-based
    context managers: an async generator, the loop's hooks for it and contextlib's machinery
    cost more per request than the steps they ran."""

    def __init__(
        self,
        pipeline: Pipeline,
        request: ProxyRequest,
        record: Record,
        request_id: str,
        headers: dict[str, str],
        identity: Identity,
    ) -> None:
        self.pipeline = pipeline
        self.request = request
        self.record = record
        self.request_id = request_id
        self.headers = headers
        self.identity = identity
        self.screening = Screening()  # what the names model finds, if the request would leave
        self._admitted: AbstractContextManager[Ticket] | None = None
        self._shared: AbstractAsyncContextManager[Produced] | None = None

    async def __aenter__(self) -> Produced:
        pipeline, request, record = self.pipeline, self.request, self.record
        tenant = pipeline.policy.tenant(self.identity.tenant)
        pipeline.runtime.gate.allow_model(tenant, request.model)
        record.note_request(self.identity.tenant, request.model)
        if pipeline.serves(request.model):  # traffic is kept per model only for models we serve
            record.note_served(request.model)
        if pipeline.policy.server.log_prompts:  # written only for levels that may leave
            record.prompt = question_of(request.body)
        admitted = pipeline.runtime.gate.admitted(tenant, request.token_estimate)
        ticket = admitted.__enter__()
        try:
            answer = await self._answer(ticket)
        except BaseException as error:
            admitted.__exit__(type(error), error, error.__traceback__)
            raise
        self._admitted = admitted
        return answer

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            if self._shared is not None:
                await self._shared.__aexit__(kind, error, traceback)
                if isinstance(error, Exception):  # a refusal names the level that refused
                    self.record.note_raised(self.screening.raised)
        except Exception:
            self.record.note_raised(self.screening.raised)
            raise
        finally:
            if self._admitted is not None:
                self._admitted.__exit__(kind, error, traceback)

    async def _answer(self, ticket: Ticket) -> Produced:
        pipeline, request, record = self.pipeline, self.request, self.record
        answers = pipeline.runtime.answers
        asked = await pipeline.asked(request, self.headers, self.identity.tenant)
        privacy, caller = asked.privacy, asked.caller
        plan = pipeline.plan(request, asked)
        record.note(plan.reasons, privacy.level, privacy.reasons)
        record.note_priority(caller.priority.name)
        caching = await answers.caching(
            pipeline.policy,
            request,
            privacy.level,
            caller.scope,
            self.headers.get("cache-control", ""),
            Sharing(keyed=self.identity.by_key, personal=privacy.detected),
        )
        found = await answers.lookup(caching)
        if isinstance(found, Reading) and not speculates(caching.rule, plan):
            found = await found.outcome
        if isinstance(found, Hit):
            return self._hit(found, ticket, caching)
        record.note_cache(caching.plan.status, caching.plan.why)  # a hit raced to says so
        screening, request_id = self.screening, self.request_id
        miss = found if isinstance(found, Miss) else Miss(found.vector)

        async def produce() -> Produced:  # a flight's: it belongs to no one client
            return await pipeline._produced(
                request, plan, asked, request_id, caching, miss, screening
            )

        shared = answers.shared(caching, produce)
        try:
            if isinstance(found, Reading):  # the verifier reads while the engine starts
                raced_to = await raced(found, shared, request.prompt_estimate, ticket.computed)
                if isinstance(raced_to, Hit):
                    return self._hit(raced_to, ticket, caching)
                if not found.outcome.done():  # dropped before its verdict: the log says why
                    record.note_cache(caching.plan.status, ENGINE_FIRST)
                head, chunks = raced_to
            else:
                head, chunks = await shared.__aenter__()
        finally:
            record.note_raised(screening.raised)
        self._shared = shared
        record.note_production(head)
        return head, _charged(head, chunks, request, ticket, record)

    def _hit(self, hit: Hit, ticket: Ticket, caching: Caching) -> Produced:
        self.record.note_cache(f"hit-{hit.kind}", "")
        ticket.use(0)  # nothing computed: a hit costs no tokens
        return self.pipeline.runtime.answers.serve_hit(hit, self.request, caching)


def _charged(
    head: Head, chunks: AsyncIterator[bytes], request: ProxyRequest, ticket: Ticket, record: Record
) -> AsyncIterator[bytes]:
    """The body, with the tokens it turns out to use charged to the caller's ticket (an error
    computed nothing worth charging) and noted in the record."""
    if head.status != 200:
        ticket.use(0)
        return chunks

    def used(usage: Usage | None) -> None:
        ticket.use(usage.total if usage else None)
        record.note_usage(usage)

    return metered(chunks, head.stream, request.prompt_estimate, used)
