"""Who asks, how urgently, and how private their request is: a request's caller and privacy
level, from the policy, its headers and its body; 400 for a class or level the policy does not
define. What the path reads in a body past a few hundred bytes (the privacy scan, and with it
the prompt's blocks) is read in a worker thread of the scans' own, so the event loop spends
about a millisecond at most on any body."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

from policies.decide import RequestFacts
from policies.model import Policy, Priority, Privacy, Tenant
from policies.priority import HEADER as PRIORITY_HEADER
from policies.priority import UnknownPriority, priority_of
from policies.privacy import HEADER, Classification, UnknownLevel, classify
from proxy.errors import BadRequest
from proxy.flow.affinity import prompt_hashes
from proxy.schema import ProxyRequest

# Bodies from this size on are scanned for personal data in a worker thread. On the costliest
# text measured (digit groups the detectors must each look at) all the detectors together take
# about 2 microseconds a byte at this size, 4-5 from a few KB on: a shorter body costs the event
# loop about a millisecond at most. Measured again with /tmp/audit/perbyte.py (issue 30).
OFFLOAD_SCAN_BYTES = 512
# Bodies from this size on are parsed in a worker thread (proxy/http/handlers.py), and read in
# one even when the policy has no detector: parsing with the nesting and tag checks, and the
# prompt's blocks, cost up to about 0.25 microseconds a byte.
OFFLOAD_PARSE_BYTES = 4 * 1024
# Bodies from this size on are read in a second thread, so that a long one (seconds, at 4 MB of
# the costliest text) never holds up the short ones queued behind it.
LONG_SCAN_BYTES = 64 * 1024

_T = TypeVar("_T")


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
    """Bodies read in worker threads (counts for /metrics), and the two threads they are read
    in: one for bodies under LONG_SCAN_BYTES, one for the rest. Threads of their own: the
    default executor serves other work (parsing, the cache's), which long scans would hold up.
    One each: the detectors are mostly Python, under the GIL, so more threads would not read
    more; and a scan given up on (past its timeout) stops at its next step, so none piles up."""

    started: int = 0
    running: int = 0
    timed_out: int = 0  # past [privacy] scan_timeout_s: counted as if every detector fired
    short: ThreadPoolExecutor = field(default_factory=lambda: _thread("short"), repr=False)
    long: ThreadPoolExecutor = field(default_factory=lambda: _thread("long"), repr=False)

    def lane(self, size: int) -> ThreadPoolExecutor:
        return self.long if size >= LONG_SCAN_BYTES else self.short


def _thread(name: str) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"overspill-scan-{name}")


@dataclass(frozen=True)
class Facts:
    """What the path reads in a request's body: how private it is, and its prompt's blocks
    hashed within the caller's scope (proxy/flow/affinity.py; none when not prefix-routed)."""

    privacy: Classification
    hashes: list[bytes]


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
    stop: threading.Event | None = None,
) -> Classification:
    header = headers.get(HEADER)
    try:
        return classify(
            policy.privacy,
            header=header,
            body=request.body,
            tenant=tenant,
            scanned=scanned,
            stop=stop,
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
    """privacy_of(), in a worker thread for a body past OFFLOAD_SCAN_BYTES when the policy looks
    for anything in text, so that other requests go on meanwhile."""
    if request.size < OFFLOAD_SCAN_BYTES or not _reads_text(policy.privacy):
        return privacy_of(policy, request, headers, tenant)

    def read(stop: threading.Event) -> Classification:
        return privacy_of(policy, request, headers, tenant, stop=stop)

    def unread() -> Classification:
        return privacy_of(policy, request, headers, tenant, scanned=False)

    return await _off_loop(scans, request.size, policy.privacy.scan_timeout_s, read, unread)


async def read_facts(
    policy: Policy,
    scans: Scans,
    request: ProxyRequest,
    headers: dict[str, str],
    caller: Caller,
) -> Facts:
    """The privacy level (privacy_of) and the prompt's blocks, read together: in one worker
    thread hop for a body past the thresholds (each reads the whole body), else here."""

    def read(stop: threading.Event | None = None) -> Facts:
        privacy = privacy_of(policy, request, headers, caller.tenant, stop=stop)
        return Facts(privacy, prompt_hashes(request, policy.balancing, caller.scope))

    def unread() -> Facts:  # no time left for the prompt either: routed as if it shared none
        return Facts(privacy_of(policy, request, headers, caller.tenant, scanned=False), [])

    size = request.size
    if size < OFFLOAD_SCAN_BYTES or (
        size < OFFLOAD_PARSE_BYTES and not _reads_text(policy.privacy)
    ):
        return read()
    return await _off_loop(scans, size, policy.privacy.scan_timeout_s, read, unread)


def _reads_text(privacy: Privacy) -> bool:
    """The policy looks for something in a request's text (else classify never walks it)."""
    return bool(privacy.detectors) or privacy.media is not None


async def _off_loop(
    scans: Scans,
    size: int,
    timeout_s: float,
    read: Callable[[threading.Event], _T],
    unread: Callable[[], _T],
) -> _T:
    """`read` in the scans' thread for a body of `size` bytes, given `timeout_s`; past it,
    `unread()` (fail closed). A read given up on (late, or its request gone) is told to stop:
    it ends at its next step, and one not yet begun never begins."""
    scans.started += 1
    scans.running += 1
    stop = threading.Event()
    job = asyncio.get_running_loop().run_in_executor(scans.lane(size), read, stop)
    try:
        return await asyncio.wait_for(job, timeout_s)
    except TimeoutError:
        scans.timed_out += 1
        return unread()
    finally:
        stop.set()
        scans.running -= 1
