"""The door every request passes: which tenant it is, and whether that tenant may start one more
request now; and whether its budget allows one more cloud call. Holds each tenant's buckets,
requests in flight, cloud spend and reservations across policy reloads; the decisions are
policies/identity, policies/admission and policies/budget (pure).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field

from policies.admission import Refusal, TenantLoad, admit, charged, settle
from policies.budget import Reserved, Spend, added, current, exhausted, released, reserve
from policies.identity import Identity, KeyRing, Unidentified, WrongTenant, identify
from policies.model import Policy, Tenant
from proxy.errors import Forbidden, RateLimited, Unauthorized

TENANT_HEADER = "x-overspill-tenant"


@dataclass
class Ticket:
    """One admitted request: what it was charged, and what it turned out to use: its answer's
    tokens, and any an engine computed for it beyond them (work started by speculation and
    withdrawn for a cache hit)."""

    charge: int
    used: int | None = None
    beside: int = 0  # tokens computed for the request that its answer does not count

    def use(self, tokens: int | None) -> None:
        self.used = tokens

    def computed(self, tokens: int) -> None:
        self.beside += tokens

    @property
    def spent(self) -> int | None:
        """What the request used in all (None: unknown, the estimate stands)."""
        return None if self.used is None else self.used + self.beside


@dataclass
class Gate:
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time  # budget periods are calendar ones
    refused: Counter[str] = field(default_factory=Counter)  # by limit: the metrics read it
    _loads: dict[str, TenantLoad] = field(default_factory=dict)
    _spend: dict[str, Spend] = field(default_factory=dict)  # cloud spend in its period
    _reserved: dict[str, Reserved] = field(default_factory=dict)  # cloud calls in flight

    def identify(self, policy: Policy, ring: KeyRing, headers: dict[str, str]) -> Identity:
        try:
            return identify(
                policy, ring, headers.get("authorization"), headers.get(TENANT_HEADER, "")
            )
        except Unidentified as error:
            self.refused["api_key"] += 1
            raise Unauthorized(str(error)) from error
        except WrongTenant as error:
            self.refused["api_key"] += 1
            raise Forbidden(str(error), code="wrong_tenant") from error

    def allow_model(self, tenant: Tenant | None, model: str) -> None:
        if tenant is not None and tenant.models is not None and model not in tenant.models:
            self.refused["models"] += 1
            allowed = ", ".join(tenant.models) or "none"
            raise Forbidden(
                f"tenant {tenant.name!r} may not use model {model!r} (allowed: {allowed})",
                param="model",
                code="model_not_allowed",
            )

    def admitted(self, tenant: Tenant | None, tokens: int) -> AbstractContextManager[Ticket]:
        """Admit the request for its tenant's limits or raise RateLimited; on exit, the request
        leaves the in-flight count and its charge becomes what it used."""
        if tenant is None or not tenant.limits.limiting:
            return nullcontext(Ticket(tokens))  # nothing to count: most requests
        return self._limited(tenant, tokens)

    @contextmanager
    def _limited(self, tenant: Tenant, tokens: int) -> Iterator[Ticket]:
        limits, name = tenant.limits, tenant.name
        verdict = admit(self._loads.get(name, TenantLoad()), limits, name, tokens, self.clock())
        if isinstance(verdict, Refusal):
            self.refused[verdict.limit] += 1
            raise RateLimited(
                verdict.message, retry_after=verdict.retry_after_s, limit=verdict.limit
            )
        self._loads[name] = verdict
        ticket = Ticket(charged(limits, tokens))
        try:
            yield ticket
        finally:
            load = self._loads.get(name, TenantLoad())
            self._loads[name] = settle(load, limits, ticket.charge, ticket.spent, self.clock())

    def load(self, tenant: str) -> TenantLoad:
        return self._loads.get(tenant, TenantLoad())

    def spend(self, tenant: Tenant | None, usd: float) -> None:
        """A cloud answer for the tenant cost `usd` (litellm's prices)."""
        if tenant is not None and usd > 0:
            name = tenant.name
            self._spend[name] = added(self._spend.get(name), usd, tenant.budget_period, self.wall())

    @property
    def ledger(self) -> dict[str, Spend]:
        """Each tenant's spend in its current period (to save; restore() puts it back)."""
        return dict(self._spend)

    def restore(self, ledger: dict[str, Spend]) -> None:
        self._spend.update(ledger)

    def spent(self, tenant: Tenant) -> float:
        return current(self._spend.get(tenant.name), tenant.budget_period, self.wall()).usd

    def cloud_closed(self, tenant: Tenant | None) -> str:
        """Why the cloud is closed to the tenant ("" when it is not): its budget is spent."""
        if tenant is None or tenant.cloud_budget_usd is None:
            return ""
        spend = self._spend.get(tenant.name)
        return exhausted(
            spend, tenant.cloud_budget_usd, tenant.budget_period, tenant.name, self.wall()
        )

    def reserved(self, tenant: Tenant | None, worst: Callable[[], float]) -> Reservation:
        """A cloud call's hold on its tenant's budget, `with` the call: raises OverBudget when
        the call may not start. `worst`, the most the call may cost, is asked only of a tenant
        with a budget."""
        return Reservation(self, tenant, worst)

    def reservations(self, tenant: Tenant) -> Reserved:
        return self._reserved.get(tenant.name, Reserved())

    def _reserve(self, tenant: Tenant, budget: float, worst: float) -> None:
        name = tenant.name
        verdict = reserve(
            self._spend.get(name),
            self._reserved.get(name, Reserved()),
            worst,
            budget,
            tenant.budget_period,
            name,
            self.wall(),
        )
        if isinstance(verdict, str):
            raise OverBudget(verdict)
        self._reserved[name] = verdict

    def _release(self, tenant: Tenant, worst: float) -> None:
        self._reserved[tenant.name] = released(self._reserved.get(tenant.name, Reserved()), worst)


class OverBudget(Exception):
    """A cloud call would not fit its tenant's budget (the reason is the message)."""


class Reservation:
    """One cloud call's worst case held against its tenant's budget, from the moment the call is
    about to be made: settled by the call's first charge (its true cost replaces it), else given
    back when the call ends uncharged (an error, or no answer). Either way once. A tenant without
    a budget reserves nothing; the charge still reaches its spend."""

    __slots__ = ("_gate", "_held", "_tenant", "_worst", "_worst_of")

    def __init__(self, gate: Gate, tenant: Tenant | None, worst: Callable[[], float]) -> None:
        self._gate, self._tenant, self._worst_of = gate, tenant, worst
        self._worst = 0.0
        self._held = False

    def __enter__(self) -> Reservation:
        tenant = self._tenant
        if tenant is not None and tenant.cloud_budget_usd is not None:
            self._worst = self._worst_of()
            self._gate._reserve(tenant, tenant.cloud_budget_usd, self._worst)
            self._held = True
        return self

    def renew(self) -> None:
        """Held again before another try of the call, when an earlier try's charge settled it
        (a stream that broke before its first chunk is charged, then retried): a retry is a
        call too. Raises OverBudget when it may not start."""
        tenant = self._tenant
        if self._held or tenant is None or tenant.cloud_budget_usd is None:
            return
        self._gate._reserve(tenant, tenant.cloud_budget_usd, self._worst)
        self._held = True

    def __exit__(self, *exc: object) -> None:
        self._give_back()

    def charge(self, usd: float) -> None:
        """The call cost `usd`: charged to the tenant, and the reservation settled."""
        self._gate.spend(self._tenant, usd)
        self._give_back()

    def _give_back(self) -> None:
        if self._held and self._tenant is not None:
            self._held = False
            self._gate._release(self._tenant, self._worst)
