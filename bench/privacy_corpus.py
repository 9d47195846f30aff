"""The labelled privacy corpus (bench/data/privacy_corpus.jsonl) and how the detectors score on
it (pure).

Each case is a request body (any shape: chat, tool calls, `user`, `prediction`, embeddings ...)
with the classes of personal data it carries; clean near-misses carry none. The corpus was
written before the detectors were tuned on it, and is split in two halves by a hash of each
case's id: tuning may look at the "tune" half only, and every figure reported is the "held"
half's (the README says so).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

CORPUS = Path(__file__).resolve().parent / "data" / "privacy_corpus.jsonl"
CLASSES = (
    "email",
    "phone",
    "payment_card",
    "us_ssn",
    "iban",
    "ip_address",
    "person",
    "street_address",
    "date_of_birth",
    "passport",
    "national_id",
    "medical",
    "secret",
)
Half = Literal["tune", "held"]


@dataclass(frozen=True)
class Case:
    id: str
    shape: str
    body: dict[str, Any]
    labels: frozenset[str]
    near_miss_of: str = ""
    note: str = ""

    @property
    def half(self) -> Half:
        """Fixed by the id alone: adding cases never moves one from a half to the other."""
        return "held" if hashlib.sha256(self.id.encode()).digest()[0] % 2 else "tune"


def load(path: Path = CORPUS) -> list[Case]:
    cases = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        raw = json.loads(line)
        labels = frozenset(raw["labels"])
        unknown = labels - set(CLASSES)
        if unknown:
            raise ValueError(f"{path}:{number}: unknown labels {sorted(unknown)}")
        case = Case(raw["id"], raw["shape"], raw["body"], labels, raw.get("near_miss_of", ""))
        cases.append(case)
    ids = [case.id for case in cases]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: ids are not unique")
    return cases


@dataclass
class Score:
    """One class on one half: requests carrying it that were found (tp) or missed (fn), and
    requests flagged for it that do not carry it (fp)."""

    tp: int = 0
    fn: int = 0
    fp: int = 0
    missed: list[str] = field(default_factory=list)  # case ids, for reading, not for tuning
    false: list[str] = field(default_factory=list)

    @property
    def precision(self) -> float | None:
        flagged = self.tp + self.fp
        return self.tp / flagged if flagged else None

    @property
    def recall(self) -> float | None:
        carried = self.tp + self.fn
        return self.tp / carried if carried else None


Detect = Callable[[dict[str, Any]], Iterable[str]]


def scores(cases: Iterable[Case], detect: Detect) -> dict[str, Score]:
    """Per class, over whole requests: what `detect` says a body carries against its labels."""
    table = {name: Score() for name in CLASSES}
    for case in cases:
        found = set(detect(case.body))
        for name in CLASSES:
            score = table[name]
            if name in case.labels and name in found:
                score.tp += 1
            elif name in case.labels:
                score.fn += 1
                score.missed.append(case.id)
            elif name in found:
                score.fp += 1
                score.false.append(case.id)
    return table


def clean_flagged(cases: Iterable[Case], detect: Detect) -> tuple[int, int]:
    """(clean requests flagged by any detector, clean requests): what would be kept from the
    cloud for nothing."""
    clean = [case for case in cases if not case.labels]
    flagged = sum(1 for case in clean if set(detect(case.body)))
    return flagged, len(clean)


def counts(cases: Iterable[Case]) -> Mapping[str, int]:
    """Requests carrying each class."""
    listed = list(cases)
    return {name: sum(1 for case in listed if name in case.labels) for name in CLASSES}
