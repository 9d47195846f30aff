"""decide(model, snapshot, rng) -> RoutingPlan: which backends to try, in order, and why. Pure.

Among the healthy backends that serve the model, the one with the least outstanding work goes
first (our in-flight requests plus the engine's own queue: least-outstanding-work beats
round-robin because requests are of very different sizes). An Ollama backend that already has the
model in memory goes before one that would have to load it. Ties are broken at random, so a
quiet fleet does not send everything to the first backend in the file.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from policies.load import BackendLoad, LoadSnapshot


@dataclass(frozen=True)
class Target:
    backend: str
    upstream_model: str

    @property
    def route(self) -> str:
        return f"local/{self.backend}"


@dataclass(frozen=True)
class RoutingPlan:
    model: str
    targets: tuple[Target, ...]
    reasons: tuple[str, ...]  # every skip and ordering decision, for headers, logs and explain

    @property
    def why_none(self) -> str:
        return "; ".join(self.reasons) or f"no backend serves model {self.model!r}"


def decide(model: str, snapshot: LoadSnapshot, rng: random.Random) -> RoutingPlan:
    reasons: list[str] = []
    usable: list[BackendLoad] = []
    for backend in snapshot.serving(model):
        if backend.healthy:
            usable.append(backend)
        else:
            reasons.append(f"unhealthy: {backend.name} ({backend.error or 'not answering'})")
    ranked = sorted(usable, key=lambda b: _rank(b, model, rng))
    if ranked:
        reasons.insert(0, _why_first(ranked, model))
    targets = tuple(Target(b.name, b.models[model]) for b in ranked)
    return RoutingPlan(model, targets, tuple(reasons))


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
