"""A request's privacy level: the strictest of what anyone says about it (pure).

Sources: the policy's default, the `X-Overspill-Privacy` header, `metadata.privacy` in the body,
the tenant's default, and the built-in detectors of personal data, each mapping to a level.
Nothing can lower a level another source set: a client cannot declare its way out of a
detector or its tenant's rule.

The header may come more than once, and each value may list levels separated by commas: each
one named is a claim, so a client's own `public` cannot undo the `restricted` a gateway
appended. Text past the detectors' scan limit (policies/pii.py) counts as if every enabled
detector had found something in it.

A reason names where a detector fired (the path of the text, never the text): read from the
scan of all the texts as one, so naming it costs one walk to that path, not a search per text.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from policies.entities import Found
from policies.model import Privacy, Tenant, UnknownName
from policies.payload import payload_of
from policies.pii import Scan, scan
from policies.quasi import held_back

HEADER = "x-overspill-privacy"
_HEADER_SOURCE = "header X-Overspill-Privacy"


class UnknownLevel(UnknownName):
    def __init__(self, source: str, name: str, known: list[str]) -> None:
        super().__init__("privacy level", source, name, "levels", known)


@dataclass(frozen=True)
class Classification:
    level: str
    reasons: tuple[str, ...]  # every source that raised the level, for explain and headers
    detected: bool = False  # a detector fired (or could not finish): personal data, maybe
    # quasi-identifiers found alone, held for the names screen before the request leaves
    held: tuple[str, ...] = ()

    @property
    def why(self) -> str:
        return "; ".join(self.reasons)


def classify(
    privacy: Privacy,
    *,
    header: str | Sequence[str] | None,
    body: dict[str, Any],
    tenant: Tenant | None,
    scanned: bool = True,
    stop: threading.Event | None = None,
) -> Classification:
    """`header`: the header's values, one per time it was sent (a single string is one).
    `scanned=False`: the detectors did not finish (a scan past its deadline): each enabled one
    counts as fired, and so does the media rule (fail closed). `stop`: once set, the scan
    raises pii.Abandoned at its next step (its caller gave up on it)."""
    claims = [(privacy.default, "policy default"), *_named(privacy, header, body)]
    if tenant is not None and tenant.privacy is not None:
        claims.append((tenant.privacy, f"tenant {tenant.name}"))
    detections, held = _detected(privacy, body, stop) if scanned else (_unscanned(privacy), ())
    claims += detections
    if len(claims) == 1:  # most requests: the default alone (no claim, nothing detected)
        reason = f"policy default: {privacy.default}"
        return Classification(privacy.default, (reason,), bool(held), held)
    strictest = max(privacy.strictness(name) for name, _ in claims)
    level = privacy.levels[strictest].name
    reasons = tuple(f"{source}: {name}" for name, source in claims if name == level)
    return Classification(level, reasons, bool(detections or held), held)


def raised(privacy: Privacy, level: str, found: Found) -> Classification:
    """The level once the names model has read a request about to leave (policies/entities.py):
    `level` (what the request was classified as), or stricter where an entity detector fired."""
    claims = [(level, "as classified")]
    claims += [(privacy.detectors[name], found.reason(name)) for name in found.fired]
    strictest = max(privacy.strictness(name) for name, _ in claims)
    name = privacy.levels[strictest].name
    return Classification(name, tuple(f"{why}: {n}" for n, why in claims[1:] if n == name))


def _named(
    privacy: Privacy, header: str | Sequence[str] | None, body: dict[str, Any]
) -> list[tuple[str, str]]:
    """The levels the client names, in the header and in the body; each must exist."""
    known = [level.name for level in privacy.levels]
    named = [(name, _HEADER_SOURCE) for name in header_levels(header)]
    if (meta := _meta(body)) is not None:
        named.append((meta, "metadata.privacy"))
    for name, source in named:
        if name not in known:
            raise UnknownLevel(source, name, known)
    return named


def header_levels(header: str | Sequence[str] | None) -> list[str]:
    """Every level the header names: each comma-separated item of each value, stripped, empty
    ones dropped, each once, in order."""
    if not header:
        return []  # most requests: no header
    values = [header] if isinstance(header, str) else list(header)
    items = (item.strip() for value in values for item in value.split(","))
    return list(dict.fromkeys(item for item in items if item))


def _detected(
    privacy: Privacy, body: dict[str, Any], stop: threading.Event | None
) -> tuple[list[tuple[str, str]], tuple[str, ...]]:
    """The detectors' claims, and the quasi-identifiers held for the names screen."""
    if not privacy.detectors and privacy.media is None:
        return [], ()  # nothing to look for: the body is not even walked
    payload = payload_of(body, stop=stop)
    found = scan(payload.texts, privacy.detectors, locate=True, stop=stop)
    held = held_back(found.fired, privacy.detectors)
    paths = payload.paths_of(set(found.first.values()), stop)
    where = {name: paths[index] for name, index in found.first.items()}
    claims = [
        (privacy.detectors[name], _detector_reason(name, found, where))
        for name in found.fired
        if name not in held
    ]
    if payload.media and privacy.media is not None:
        claims.append((privacy.media, f"media at {payload.media[0]}"))
    return claims, held


def _unscanned(privacy: Privacy) -> list[tuple[str, str]]:
    claims = [(level, f"{name}: not scanned in time") for name, level in privacy.detectors.items()]
    if privacy.media is not None:
        claims.append((privacy.media, "media: not scanned in time"))
    return claims


def _detector_reason(name: str, found: Scan, where: Mapping[str, str]) -> str:
    """Which detector, and where: the path of the text its first find is in (never the text;
    no path when its finder could not say)."""
    if name not in found.detected:
        return f"{name}: text beyond the scan limit ({found.limit} characters)"
    path = where.get(name)
    return f"detected {name} in {path}" if path else f"detected {name}"


def _meta(body: dict[str, Any]) -> str | None:
    metadata = body.get("metadata")
    value = metadata.get("privacy") if isinstance(metadata, dict) else None
    return value if isinstance(value, str) else None


def request_texts(body: dict[str, Any]) -> list[str]:
    """Every string of the body as the detectors read it (policies/payload.py)."""
    return list(payload_of(body).texts)


def names_redacted(privacy: Privacy) -> bool:
    """Whether a name found sends a request on redacted rather than keeping it local: then
    the names tagger reads at its thorough threshold (a false flag costs a placeholder, not
    the overflow)."""
    person = privacy.detectors.get("person")
    return person is not None and privacy.level(person).redact
