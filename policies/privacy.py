"""A request's privacy level: the strictest of what anyone says about it (pure).

Sources: the policy's default, the `X-Overspill-Privacy` header, `metadata.privacy` in the body,
the tenant's default, and the built-in detectors of personal data, each mapping to a level.
Nothing can lower a level another source set: a client cannot declare its way out of a
detector or its tenant's rule.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from policies.model import Privacy, Tenant, UnknownName
from policies.pii import detect

HEADER = "x-overspill-privacy"


class UnknownLevel(UnknownName):
    def __init__(self, source: str, name: str, known: list[str]) -> None:
        super().__init__("privacy level", source, name, "levels", known)


@dataclass(frozen=True)
class Classification:
    level: str
    reasons: tuple[str, ...]  # every source that raised the level, for explain and headers

    @property
    def why(self) -> str:
        return "; ".join(self.reasons)


def classify(
    privacy: Privacy,
    *,
    header: str | None,
    body: dict[str, Any],
    tenant: Tenant | None,
) -> Classification:
    known = [level.name for level in privacy.levels]
    claims: list[tuple[str, str]] = [(privacy.default, "policy default")]
    for source, name in (("header X-Overspill-Privacy", header), ("metadata.privacy", _meta(body))):
        if name is not None:
            if name not in known:
                raise UnknownLevel(source, name, known)
            claims.append((name, source))
    if tenant is not None and tenant.privacy is not None:
        claims.append((tenant.privacy, f"tenant {tenant.name}"))
    for detector in detect(request_texts(body), privacy.detectors):
        claims.append((privacy.detectors[detector], f"detected {detector}"))
    strictest = max(privacy.strictness(name) for name, _ in claims)
    level = privacy.levels[strictest].name
    reasons = tuple(f"{source}: {name}" for name, source in claims if name == level)
    return Classification(level, reasons)


def _meta(body: dict[str, Any]) -> str | None:
    metadata = body.get("metadata")
    value = metadata.get("privacy") if isinstance(metadata, dict) else None
    return value if isinstance(value, str) else None


def request_texts(body: dict[str, Any]) -> list[str]:
    """Every string the model would read: message contents and parts, tool-call arguments,
    the completion prompt, embedding inputs."""
    return list(_strings([body.get("messages"), body.get("prompt"), body.get("input")]))


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
