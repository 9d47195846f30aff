"""The door every request passes: which tenant it is, and whether that tenant may start one more
request now. Holds each tenant's buckets and requests in flight across policy reloads; the
decisions are policies/identity and policies/admission (pure).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field

from policies.admission import Refusal, TenantLoad, admit, charged, settle
from policies.budget import Spend, added, current, exhausted
from policies.identity import Identity, KeyRing, Unidentified, WrongTenant, identify
from policies.model import Policy, Tenant
from proxy.errors import Forbidden, RateLimited, Unauthorized

TENANT_HEADER = "x-overspill-tenant"


@dataclass
class Ticket:
    """One admitted request: what it was charged, and what it turned out to use."""

    charge: int
    used: int | None = None

    def use(self, tokens: int | None) -> None:
        self.used = tokens


@dataclass
class Gate:
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time  # budget periods are calendar ones
    refused: Counter[str] = field(default_factory=Counter)  # by limit: the metrics read it
    _loads: dict[str, TenantLoad] = field(default_factory=dict)
    _spend: dict[str, Spend] = field(default_factory=dict)  # cloud spend in its period

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
            self._loads[name] = settle(load, limits, ticket.charge, ticket.used, self.clock())

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
