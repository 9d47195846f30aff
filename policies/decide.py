"""decide(...) -> RoutingPlan: where a request may go, in order, and why. Pure.

1. Local candidates (the route's backends, or every backend serving the model): unhealthy and
   breaker-open ones are skipped; the others are split into usable and saturated (policies/
   saturation.py). Usable ones are ranked by least outstanding work (a warm Ollama instance
   first, ties at random).
2. The cloud chain, in the route's order, keeps only the targets the request's privacy level
   allows and whose breakers are not open; none for a tenant past its cloud budget.
3. Order: usable locals, then the cloud chain, then saturated locals as a last resort. When no
   local is usable the request overflows: the cloud chain comes first. A request the cloud may
   not take is served by a saturated local if its predicted wait fits the route's deadline, and
   refused (no targets) otherwise: it never reaches the cloud.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from policies.load import BackendLoad, LoadSnapshot
from policies.model import Policy, Route
from policies.saturation import predicted_ttft, saturation


@dataclass(frozen=True)
class RequestFacts:
    model: str
    privacy: str = "public"  # the level's name
    tokens: int = 256  # estimated prompt tokens + max_tokens
    # prompt tokens each replica is believed to hold in its KV cache (cache/prefix.py)
    prefix: Mapping[str, int] = field(default_factory=dict)
    turn: int = 0  # this request's number, for round robin
    no_cloud: str = ""  # why the cloud is closed to this request beyond privacy (its budget)
    share: float = 1.0  # of each backend's overflow thresholds, for its priority class


@dataclass(frozen=True)
class Target:
    kind: Literal["local", "cloud"]
    name: str
    upstream_model: str

    @property
    def route(self) -> str:
        return f"{self.kind}/{self.name}"


@dataclass(frozen=True)
class RoutingPlan:
    model: str
    targets: tuple[Target, ...]
    reasons: tuple[str, ...]  # every skip and ordering decision: headers, logs, explain
    privacy: str = "public"
    overflowed: bool = False
    saturated: frozenset[str] = field(default_factory=frozenset)  # for the next hysteresis
    kept_local: bool = False  # the privacy level kept a cloud target of the route out

    @property
    def why_none(self) -> str:
        return "; ".join(self.reasons) or f"no target serves model {self.model!r}"

    @property
    def waits_for_local(self) -> bool:
        """It goes first to a local backend that has no room now: the request would queue."""
        first = self.targets[0] if self.targets else None
        return first is not None and first.kind == "local" and first.name in self.saturated

    @property
    def pressed(self) -> bool:
        """No local backend has room for the request now, and it does not go to the cloud."""
        return not self.targets or self.waits_for_local

    @property
    def local_room_now(self) -> bool:
        """It goes first to a local backend that has room now."""
        first = self.targets[0] if self.targets else None
        return first is not None and first.kind == "local" and first.name not in self.saturated


def route_for(policy: Policy, model: str) -> Route:
    return policy.route(model) or policy.default_route(model)


def decide(
    facts: RequestFacts,
    policy: Policy,
    snapshot: LoadSnapshot,
    rng: random.Random,
    blocked: Mapping[str, str] | None = None,
    saturated_before: frozenset[str] = frozenset(),
) -> RoutingPlan:
    """`blocked` names targets whose breakers are open (with why)."""
    blocked = blocked or {}
    route = route_for(policy, facts.model)
    reasons: list[str] = []
    usable, saturated = _split_locals(
        facts, policy, route, snapshot, blocked, saturated_before, reasons
    )
    ranked, why_first = _order(usable, facts, policy, rng)
    clouds = _cloud_chain(facts, policy, route, blocked, reasons)
    local = [Target("local", b.name, b.models[facts.model]) for b in ranked]
    last_resort = [Target("local", b.name, b.models[facts.model]) for b in saturated]
    overflowed = not local and bool(clouds) and bool(saturated)
    if local:
        reasons.insert(0, why_first)
    elif overflowed:
        reasons.insert(0, "overflow: every local backend is saturated")
    elif saturated and not clouds:
        last_resort = _within_deadline(facts, policy, route, saturated, reasons)
    targets = (*local, *clouds, *last_resort)
    return RoutingPlan(
        facts.model,
        tuple(targets),
        tuple(reasons),
        facts.privacy,
        overflowed,
        frozenset(b.name for b in saturated),
        any(not policy.privacy.level(facts.privacy).allows(name) for name in route.cloud),
    )


def _split_locals(
    facts: RequestFacts,
    policy: Policy,
    route: Route,
    snapshot: LoadSnapshot,
    blocked: Mapping[str, str],
    saturated_before: frozenset[str],
    reasons: list[str],
) -> tuple[list[BackendLoad], list[BackendLoad]]:
    names = route.local or tuple(b.name for b in snapshot.serving(facts.model))
    by_name = {b.name: b for b in snapshot.backends}
    usable: list[BackendLoad] = []
    saturated: list[BackendLoad] = []
    for name in names:
        backend = by_name.get(name)
        if backend is None or facts.model not in backend.models:
            continue
        if not backend.healthy:
            reasons.append(f"unhealthy: {name} ({backend.error or 'not answering'})")
        elif name in blocked:
            reasons.append(f"breaker open: {name} ({blocked[name]})")
        else:
            limit = policy.backend(name).max_concurrency
            verdict = saturation(
                backend,
                route.overflow.scaled(facts.share),
                limit,
                facts.tokens,
                name in saturated_before,
            )
            if verdict.saturated:
                reasons.append(f"saturated: {verdict.reason}")
                saturated.append(backend)
            else:
                usable.append(backend)
    saturated.sort(key=lambda b: b.outstanding)
    return usable, saturated


def _cloud_chain(
    facts: RequestFacts,
    policy: Policy,
    route: Route,
    blocked: Mapping[str, str],
    reasons: list[str],
) -> list[Target]:
    level = policy.privacy.level(facts.privacy)
    if facts.no_cloud and route.cloud:
        reasons.append(facts.no_cloud)
        return []
    chain = []
    for name in route.cloud:
        if not level.allows(name):
            reasons.append(f"privacy={facts.privacy}: cloud {name} not allowed")
        elif name in blocked:
            reasons.append(f"breaker open: {name} ({blocked[name]})")
        else:
            chain.append(Target("cloud", name, policy.cloud(name).model))
            if level.redact:
                reasons.append(f"privacy={facts.privacy}: cloud {name} only redacted")
    return chain


def _within_deadline(
    facts: RequestFacts,
    policy: Policy,
    route: Route,
    saturated: list[BackendLoad],
    reasons: list[str],
) -> list[Target]:
    """Saturated locals a cloud-forbidden request may still wait for (all, without a deadline)."""
    if route.deadline_s is None:
        reasons.insert(0, "saturated, no cloud allowed: queued locally")
        return [Target("local", b.name, b.models[facts.model]) for b in saturated]
    kept = []
    for backend in saturated:
        wait = predicted_ttft(backend, facts.tokens, policy.backend(backend.name).max_concurrency)
        if wait is not None and wait > route.deadline_s:
            reasons.append(
                f"deadline: {backend.name} predicted wait {wait:.1f}s > {route.deadline_s:g}s"
            )
        else:
            kept.append(Target("local", backend.name, backend.models[facts.model]))
    return kept


def _order(
    usable: list[BackendLoad], facts: RequestFacts, policy: Policy, rng: random.Random
) -> tuple[list[BackendLoad], str]:
    """The usable locals in the order to try them, and why the first one comes first."""
    balancing = policy.balancing
    if not usable:
        return [], ""
    if balancing.strategy == "round_robin":
        ordered = sorted(usable, key=lambda b: b.name)
        turn = facts.turn % len(ordered)
        ordered = ordered[turn:] + ordered[:turn]
        return ordered, f"round robin: {ordered[0].name}"
    ranked = sorted(usable, key=lambda b: _rank(b, facts.model, rng))
    if balancing.strategy == "prefix":
        holder = max(ranked, key=lambda b: facts.prefix.get(b.name, 0))  # stable: least busy
        held = facts.prefix.get(holder.name, 0)
        if held >= balancing.min_prefix_tokens and holder is not ranked[0]:
            least = ranked[0].outstanding
            if (
                holder.outstanding - least > balancing.balance_abs
                and holder.outstanding > balancing.balance_rel * least
            ):
                why = (
                    f"prefix on {holder.name} ({held} tokens) but it is much busier "
                    f"({holder.outstanding} vs {least} outstanding): "
                )
                return ranked, why + _why_first(ranked, facts.model)
            ranked.remove(holder)
            ranked.insert(0, holder)
        if held >= balancing.min_prefix_tokens:
            return ranked, (
                f"prefix: {holder.name} holds {held} prompt tokens "
                f"({holder.outstanding} outstanding)"
            )
    return ranked, _why_first(ranked, facts.model)


def _why_first(ranked: list[BackendLoad], model: str) -> str:
    first = ranked[0]
    warm = first.has_loaded(first.models[model]) is True
    colder = [b for b in ranked[1:] if b.has_loaded(b.models[model]) is False]
    if warm and colder and any(b.outstanding < first.outstanding for b in colder):
        return f"model loaded: {first.name} ({first.outstanding} outstanding, others would load it)"
    return f"least outstanding: {first.name} ({first.outstanding} outstanding)"


def _rank(backend: BackendLoad, model: str, rng: random.Random) -> tuple[bool, int, float]:
    cold = backend.has_loaded(backend.models[model]) is False
    return (cold, backend.outstanding, rng.random())
