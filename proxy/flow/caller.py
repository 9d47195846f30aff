"""Who asks, how urgently, and how private their request is: a request's caller and privacy
level, from the policy, its headers and its body; 400 for a class or level the policy does not
define. The privacy scan of a long body runs in a worker thread."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass

from policies.decide import RequestFacts
from policies.model import Policy, Priority, Tenant
from policies.priority import HEADER as PRIORITY_HEADER
from policies.priority import UnknownPriority, priority_of
from policies.privacy import HEADER, Classification, UnknownLevel, classify
from proxy.errors import BadRequest
from proxy.schema import ProxyRequest

# Request bodies from this size on are parsed and scanned for personal data in a worker thread.
OFFLOAD_SCAN_BYTES = 64 * 1024


@dataclass(frozen=True)
class Caller:
    """Who asks, and how urgently."""

    named: str  # the tenant's name as the request gave it ("" for none)
    tenant: Tenant | None  # the declared tenant, if it is one
    priority: Priority
    why_priority: str = "policy default"

    @property
    def scope(self) -> str:
        """What the caller's cache entries and prefix records are kept under: its declared
        tenant, else the one shared anonymous scope. A name anyone may claim isolates nothing,
        and must not let a client create scopes without end."""
        return self.tenant.name if self.tenant is not None else ""


@dataclass
class Scans:
    """Privacy scans of long bodies in worker threads: for /metrics."""

    started: int = 0
    running: int = 0
    timed_out: int = 0  # past [privacy] scan_timeout_s: counted as if every detector fired


def caller_of(policy: Policy, request: ProxyRequest, headers: dict[str, str], named: str) -> Caller:
    tenant = policy.tenant(named)  # None for a tenant only named, not declared
    priorities = policy.priorities
    try:
        chosen = priority_of(priorities, headers.get(PRIORITY_HEADER), request.body, tenant)
    except UnknownPriority as error:
        param = "metadata.priority" if error.source == "metadata.priority" else None
        raise BadRequest(str(error), param=param, code="unknown_priority") from error
    return Caller(named, tenant, priorities.of(chosen.name), chosen.reason)


def request_facts(
    request: ProxyRequest,
    level: str,
    caller: Caller,
    budget_closed: str,
    held: Mapping[str, int] | None = None,
    turn: int = 0,
) -> RequestFacts:
    """What decide() knows of a request. The live path, /admin/explain and `overspill explain`
    all build it here, so an explanation cannot leave out what the proxy weighs. `budget_closed`
    is why the caller's cloud budget is spent ("" if it is not); `held`, the prompt tokens each
    replica holds; `turn`, the caller's round-robin turn among equals."""
    priority = caller.priority
    no_cloud = budget_closed
    if not priority.overflow:
        no_cloud = no_cloud or f"priority: {priority.name} never overflows to the cloud"
    return RequestFacts(
        request.model,
        level,
        request.token_estimate,
        held or {},
        turn,
        no_cloud,
        priority.local_share,
    )


def privacy_of(
    policy: Policy,
    request: ProxyRequest,
    headers: dict[str, str],
    tenant: Tenant | None,
    scanned: bool = True,
) -> Classification:
    header = headers.get(HEADER)
    try:
        return classify(
            policy.privacy, header=header, body=request.body, tenant=tenant, scanned=scanned
        )
    except UnknownLevel as error:
        param = "metadata.privacy" if error.source == "metadata.privacy" else None
        raise BadRequest(str(error), param=param, code="unknown_privacy_level") from error


async def scanned_privacy(
    policy: Policy,
    scans: Scans,
    request: ProxyRequest,
    headers: dict[str, str],
    tenant: Tenant | None,
) -> Classification:
    """privacy_of(), in a worker thread for a long body, so that other requests go on
    meanwhile (the detectors run in linear time, but a few megabytes still take a while)."""
    if request.size < OFFLOAD_SCAN_BYTES:
        return privacy_of(policy, request, headers, tenant)
    scans.started += 1
    scans.running += 1
    scan = asyncio.to_thread(privacy_of, policy, request, headers, tenant)
    try:
        return await asyncio.wait_for(scan, policy.privacy.scan_timeout_s)
    except TimeoutError:
        # The thread goes on to its end (the scan is linear, so it ends); the request does not
        # wait for it, and leaves as if every detector had found something.
        scans.timed_out += 1
        return privacy_of(policy, request, headers, tenant, scanned=False)
    finally:
        scans.running -= 1
