"""A plan's targets tried in order: each through its leg (proxy/flow/legs.py), retried as the policy
allows before the first byte (proxy/flow/attempts.py), until one answers.

What a target holds (in-flight counts; a cloud call's reservation of its tenant's budget) is
released when its answer's body has been consumed, or at once if it did not answer; a cloud
target whose tenant's budget cannot hold one more call is skipped, as one whose breaker is open.
A target that says the request itself is wrong (a 4xx) ends the chain: no other one would answer
differently. When every target failed, the last failure's status tells the client most, and the
message names every reason.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from types import TracebackType

from policies.decide import RoutingPlan, Target
from policies.model import Policy, Tenant
from proxy.errors import APIError, NoBackend, UpstreamError
from proxy.flow.affinity import Prompt
from proxy.flow.attempts import Opened, TargetRefused, attempt, relayed
from proxy.flow.caching import Head, Produced
from proxy.flow.gate import OverBudget, Reservation
from proxy.flow.legs import Cleared, Leg, Screening, legs
from proxy.flow.runtime import Runtime
from proxy.flow.waiting import Turn
from proxy.legs.answer import Answer
from proxy.legs.breaker import Breaker
from proxy.schema import ProxyRequest


@dataclass(frozen=True)
class Trip:
    """One request down the chain: what its legs need to know of it."""

    request: ProxyRequest
    level: str  # its privacy level
    request_id: str
    prompt: Prompt
    tenant: Tenant | None
    deadline: float  # a reading of the runtime's clock
    level_why: str = ""  # what set the level: detectors and fields, never the values
    screening: Screening = field(default_factory=Screening, compare=False)  # names, once


@dataclass
class Chain:
    policy: Policy
    runtime: Runtime
    breakers: dict[str, Breaker]
    legs: dict[str, Leg] = field(init=False)

    def __post_init__(self) -> None:
        self.legs = legs(self.policy, self.runtime)

    async def produce(self, trip: Trip, plan: RoutingPlan, turn: Turn | None) -> Produced:
        """The first target of the plan that answers: its answer's head and body. A waiting
        room `turn` is given back once the request is counted in flight somewhere, or when no
        target took it."""
        try:
            return await self._first_answer(trip, plan, turn)
        finally:
            if turn is not None:
                turn.taken()

    async def _first_answer(self, trip: Trip, plan: RoutingPlan, turn: Turn | None) -> Produced:
        failures = list(plan.reasons)
        last_error: UpstreamError | None = None
        kept = plan.kept_local
        for index, target in enumerate(plan.targets):
            leg = self.legs[target.kind]
            cleared = await leg.clear(target, trip.request, trip.level, trip.screening)
            if cleared.request is None:
                # decide() plans no target the level forbids (checked again all the same); the
                # names model may find more, and a level that leaves only redacted needs a
                # request that can all be redacted
                failures.append(cleared.refusal(trip.level, target))
                kept = True
                continue
            try:
                return await self._try(trip, target, cleared, plan.targets[index + 1 :], turn)
            except OverBudget as over:  # before any call: the next target may still answer
                failures.append(str(over))
            except TargetRefused as refused:
                failures.append(f"breaker open: {target.name} ({refused})")
            except UpstreamError as error:
                if not error.retryable:
                    raise  # the target says the request itself is wrong: no other one helps
                failures.append(error.message)
                last_error = error
        raise _none_answered(trip, plan, failures, last_error, kept)

    async def _try(
        self,
        trip: Trip,
        target: Target,
        cleared: Cleared,
        later: tuple[Target, ...],
        turn: Turn | None,
    ) -> Produced:
        leg = self.legs[target.kind]
        held = Held(leg.hold(target, trip.request, trip.tenant))
        try:
            if turn is not None:
                turn.taken()  # counted in flight: the waiting room's next may go
            elsewhere = self._open_after(later, trip.level)
            opened = await self._attempt(leg, target, trip, cleared, elsewhere, held.entered)
        except BaseException as error:  # released here: no answer takes it
            held.__exit__(type(error), error, error.__traceback__)
            raise
        answer = opened.answer
        head = Head(target.route, answer.status, answer.headers(), answer.stream)
        # the target is held until its body has passed (or the client left)
        body = relayed(opened, self.breakers[target.name], self.runtime.clock, held)
        return head, body

    async def _attempt(
        self,
        leg: Leg,
        target: Target,
        trip: Trip,
        cleared: Cleared,
        elsewhere: bool,
        reservation: Reservation | None,
    ) -> Opened:
        """attempt() on the target's leg, inside what the leg waits for first (a local engine's
        prefill of the same prompt)."""

        async def opener() -> Answer:
            return await leg.open(target, cleared, trip.request_id, reservation)

        breaker, clock, retry = self.breakers[target.name], self.runtime.clock, self.policy.retry
        async with leg.prefilling(target, trip.prompt, trip.request.stream):
            return await attempt(opener, breaker, retry, trip.deadline, clock, elsewhere)

    def _open_after(self, later: tuple[Target, ...], level: str) -> bool:
        """Whether a later target of the plan could take the request now."""
        now = self.runtime.clock.now()
        return any(
            self.legs[t.kind].may_carry(level, t) and self.breakers[t.name].would_allow(now)
            for t in later
        )


class Held:
    """What a target holds for a request (its in-flight count), entered now and released once:
    by the chain if the target did not answer, else when its answer's body has passed. An
    ExitStack's work for one context, at a fraction of its cost on every request."""

    __slots__ = ("_context", "entered")

    def __init__(self, context: AbstractContextManager[Reservation | None]) -> None:
        self.entered = context.__enter__()  # what the leg's hold gives its open
        self._context: AbstractContextManager[Reservation | None] | None = context

    def __enter__(self) -> Held:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        context, self._context = self._context, None
        if context is not None:
            context.__exit__(kind, error, traceback)


def _none_answered(
    trip: Trip,
    plan: RoutingPlan,
    failures: list[str],
    last_error: UpstreamError | None,
    kept_local: bool,
) -> APIError:
    model = trip.request.model
    why = "; ".join(failures or [plan.why_none])
    if last_error is not None:
        # Every target was tried and failed: the last failure's status tells the client most
        # (502 engine failure, 503 overloaded, 429 with Retry-After), the message tells all.
        last_error.message = f"every target failed for model {model!r}: {why}"
        return last_error
    privacy = f"privacy={trip.level}" + (f" ({trip.level_why})" if trip.level_why else "")
    refusal = NoBackend(f"no target could serve model {model!r} ({privacy}): {why}")
    if kept_local:
        # Final: the SDKs would otherwise retry a 503, and the level will not change.
        refusal.headers = {**refusal.headers, "x-should-retry": "false"}
    return refusal
