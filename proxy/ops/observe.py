"""What each finished request leaves behind: one JSON log line and its Prometheus series.

The request path notes what it decided in the request's Record (proxy/flow/record.py: tenant, route,
reasons, cache, tokens...); the access middleware times the request and its first body byte and
hands everything here once the response is sent. Labels stay low-cardinality: tenants and
targets are the policy's own names (anything else is "other"), reasons are reduced to their kind.

Prompt text is logged only when the policy says `[server] log_prompts = true`, and never for a
request whose privacy level may not leave the building (`cloud = "none"`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from prometheus_client import CollectorRegistry, Histogram

from policies.model import Policy
from proxy.flow.record import Record
from proxy.ops.loop_lag import LAG_BUCKETS
from proxy.ops.recent import Recent
from proxy.ops.tallies import Tallies

log = logging.getLogger("overspill.access")

API_PREFIX = "/v1/"
# Seconds; TTFTs of tens of ms to whole answers of minutes.
BUCKETS = (0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
REASON_KINDS = (
    "least outstanding",
    "model loaded",
    "prefix",
    "round robin",
    "overflow",
    "saturated, no cloud allowed",
    "saturated",
    "unhealthy",
    "breaker open",
    "privacy",
    "deadline",
    "budget",
    "priority",
)
_KINDS = frozenset(REASON_KINDS)
_REASON_ENDS = (" on ", ":", "=", "(")


@dataclass(frozen=True)
class Finished:
    method: str
    path: str
    status: int
    seconds: float
    first_byte_s: float | None  # until the first body byte: the TTFT of a stream
    record: Record  # what the request path noted

    @property
    def request_id(self) -> str:
        return self.record.request_id


def decision(done: Finished) -> str:
    route = done.record.route
    if route == "cache":
        return "cache"
    if route.startswith(("local/", "cloud/")):
        return route.split("/", 1)[0]
    return "refused" if 400 <= done.status < 500 or done.status == 503 else "error"


def reason_kind(reasons: Any) -> str:
    """The kind of the decisive (first) reason, from a fixed set."""
    if not reasons:
        return "none"
    text = str(reasons[0])
    # the head ends at the first separator (found by str.find: a regex tried at every
    # position cost 1.6% of a forwarded request's CPU)
    ends = [at for at in map(text.find, _REASON_ENDS) if at >= 0]
    head = text[: min(ends)].strip() if ends else text.strip()
    return head if head in _KINDS else "other"


def _entry(done: Finished, kind: str, at: float) -> Callable[[], dict[str, Any]]:
    """A decision as the dashboard lists it, built only if a page asks (most are not shown)."""
    record = done.record

    def entry() -> dict[str, Any]:
        return {
            "at": round(at, 3),
            "request_id": done.request_id,
            "tenant": record.tenant,
            "model": record.model,
            "route": record.route or "none",
            "decision": kind,
            "status": done.status,
            "cache": record.cache,
            "reasons": list(record.reasons[:3]),
            "error": record.error,
            "ms": round(done.seconds * 1000, 1),
        }

    return entry


class Observer:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.policy: Callable[[], Policy | None] = lambda: None  # set once the proxy is up
        tallies = Tallies()  # per request: plain numbers, rendered at scrape time
        self.requests = tallies.count(
            "overspill_requests",
            "API requests by what was decided and why.",
            ["decision", "target", "reason", "tenant", "code"],
        )
        self.latency = tallies.histogram(
            "overspill_request_seconds",
            "End-to-end latency of API requests.",
            ["decision"],
            BUCKETS,
        )
        self.ttft = tallies.histogram(
            "overspill_ttft_seconds",
            "Time to the first body byte of successful API answers.",
            ["decision"],
            BUCKETS,
        )
        self.tokens = tallies.count(
            "overspill_tokens", "Tokens engines and clouds processed.", ["direction", "decision"]
        )
        self.queued = tallies.histogram(
            "overspill_queue_wait_seconds",
            "Time requests waited in the waiting room for a local engine.",
            [],
            BUCKETS,
        )
        registry.register(tallies)
        self.recent = Recent()  # the dashboard's last minutes
        self.loop_lag = Histogram(  # a few times a second: prometheus_client's own is cheap here
            "overspill_event_loop_lag_seconds",
            "How much later than asked the event loop woke (proxy/ops/loop_lag.py).",
            buckets=LAG_BUCKETS,
            registry=registry,
        )

    def finished(self, done: Finished) -> None:
        if done.path.startswith(API_PREFIX) and done.method == "POST":
            self._count(done)
        if log.isEnabledFor(logging.INFO):
            log.info(orjson.dumps(self.line(done)).decode())

    def _count(self, done: Finished) -> None:
        kind = decision(done)
        policy = self.policy()
        record = done.record
        # counted by model only for a model the proxy serves: a client cannot grow the table
        self.recent.add(record.served_model or "other", kind, _entry(done, kind, time.time()))
        target = self._target(done, policy)
        tenant = self._tenant(record.tenant, policy)
        labels = (kind, target, reason_kind(record.reasons), tenant, str(done.status))
        self.requests.add(labels)
        self.latency.observe((kind,), done.seconds)
        if done.status == 200 and done.first_byte_s is not None:
            self.ttft.observe((kind,), done.first_byte_s)
        if record.tokens_in is not None:
            self.tokens.add(("in", kind), record.tokens_in)
        if record.tokens_out is not None:
            self.tokens.add(("out", kind), record.tokens_out)
        if record.queued_s is not None:
            self.queued.observe((), record.queued_s)

    def line(self, done: Finished) -> dict[str, Any]:
        record = done.record
        line: dict[str, Any] = {
            "request_id": done.request_id,
            "method": done.method,
            "path": done.path,
            "status": done.status,
            "ms": round(done.seconds * 1000, 2),
        }
        if done.first_byte_s is not None:
            line["ttft_ms"] = round(done.first_byte_s * 1000, 2)
        noted = {
            "tenant": record.tenant,
            "model": record.model,
            "priority": record.priority,
            "privacy": record.privacy,
            "privacy_because": list(record.privacy_because),
            "route": record.route,
            "cache": record.cache,
            "reasons": list(record.reasons),
            "tokens_in": record.tokens_in,
            "tokens_out": record.tokens_out,
            "queued_s": record.queued_s,
            "degraded": record.degraded,
            "error": record.error,
        }
        line.update({key: value for key, value in noted.items() if value not in (None, "", [])})
        prompt = self._prompt(record)
        if prompt is not None:
            line["prompt"] = prompt
        return line

    def _prompt(self, record: Record) -> str | None:
        policy = self.policy()
        if policy is None or not policy.server.log_prompts or record.prompt is None:
            return None
        level = next((lv for lv in policy.privacy.levels if lv.name == record.privacy), None)
        if level is None or level.cloud == "none":
            return None  # unknown or restricted: never written down
        return record.prompt

    @staticmethod
    def _target(done: Finished, policy: Policy | None) -> str:
        route = done.record.route
        name = route.split("/", 1)[1] if "/" in route else route or "none"
        if name in ("cache", "none") or policy is None:
            return name
        return name if policy.has_target(name) else "other"

    @staticmethod
    def _tenant(named: Any, policy: Policy | None) -> str:
        if not named:
            return "none"
        declared = policy is not None and policy.tenant(str(named)) is not None
        return str(named) if declared else "other"
