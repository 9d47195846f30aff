"""A request's priority class, and the order in which waiting requests get a local engine (pure).

The class is the request's (header `X-Overspill-Priority` or `metadata.priority`), else its
tenant's, else the policy default. A request may ask for a less urgent class than its tenant's
but never a more urgent one: a batch tenant cannot declare itself interactive.

Waiting requests are served by class, then by arrival; every `aging_s` a request waits lifts it
one class, so a steady stream of urgent requests delays the others but never starves them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from policies.model import Priorities, Tenant, UnknownName

HEADER = "x-overspill-priority"


class UnknownPriority(UnknownName):
    def __init__(self, source: str, name: str, known: list[str]) -> None:
        super().__init__("priority", source, name, "classes", known)


@dataclass(frozen=True)
class Chosen:
    name: str
    reason: str


def priority_of(
    priorities: Priorities, header: str | None, body: dict[str, Any], tenant: Tenant | None
) -> Chosen:
    """`header` may hold several classes, comma-separated (sent twice, or appended to by a
    gateway): each is a claim, and the least urgent one wins."""
    known = [p.name for p in priorities.classes]
    asked: Chosen | None = None
    claims = [
        ("header X-Overspill-Priority", item.strip())
        for item in (header or "").split(",")
        if item.strip()
    ]
    meta = _meta(body)
    if meta is not None:
        claims.append(("metadata.priority", meta))
    for source, name in claims:
        if name not in known:
            raise UnknownPriority(source, name, known)
        if asked is None or priorities.rank(name) > priorities.rank(asked.name):
            asked = Chosen(name, source)  # asked twice: the less urgent, as for a tenant
    floor = tenant.priority if tenant is not None else None
    if floor is not None and (
        asked is None or priorities.rank(asked.name) < priorities.rank(floor)
    ):
        assert tenant is not None
        return Chosen(floor, f"tenant {tenant.name}")
    return asked or Chosen(priorities.default, "policy default")


def _meta(body: dict[str, Any]) -> str | None:
    metadata = body.get("metadata")
    value = metadata.get("priority") if isinstance(metadata, dict) else None
    return value if isinstance(value, str) else None


def urgency(rank: int, waited_s: float, aging_s: float) -> float:
    """Lower is served first: the class's rank, less one for every aging_s waited."""
    return rank - waited_s / aging_s


def predicted_wait(ahead: int, drain_per_s: float | None) -> float | None:
    """Seconds until a request with `ahead` requests before it gets a local engine, at the rate
    the queue has been draining (None: no rate known yet)."""
    if not drain_per_s:
        return None
    return (ahead + 1) / drain_per_s
