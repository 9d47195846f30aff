"""More names for the names tagger to learn from (pure, given a seeded random source): each tune
row that names someone, again with every name replaced by one drawn from faker's lists in the
same script ("Ana Souza" for "Mário Soares", "朴敏俊" for "이아현"), so the tagger learns what
names look like across locales rather than the few the labelled sets hold, and that the
gazetteer's names are names where a name fits (a German name among capitalised nouns).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from policies.name_features import Gazetteer, script_of, unspaced


@dataclass(frozen=True)
class Pools:
    """Given names and surnames by script, sorted (the same seed draws the same names)."""

    given: dict[str, tuple[str, ...]]
    family: dict[str, tuple[str, ...]]


def pools(names: Gazetteer) -> Pools:
    def by_script(words: frozenset[str]) -> dict[str, tuple[str, ...]]:
        out: dict[str, list[str]] = {}
        for word in sorted(words):
            if word and " " not in word:
                out.setdefault(script_of(word[0]), []).append(word)
        return {script: tuple(found) for script, found in out.items()}

    return Pools(by_script(names.given), by_script(names.family))


def renamed(
    row: dict[str, Any], labels: Sequence[str], names: Pools, rng: random.Random
) -> dict[str, Any] | None:
    """`row` with each name in it replaced by a drawn one of its script (spans moved to
    match); None when it names nobody or a name's script has no lists."""
    people = sorted((s for s in row["spans"] if s["label"] in labels), key=lambda s: s["start"])
    if not people:
        return None
    text: str = row["text"]
    pieces: list[str] = []
    spans: list[dict[str, Any]] = []
    end = 0
    for span in people:
        if span["start"] < end:
            return None  # overlapping spans: left as they are
        name = _drawn(text[span["start"] : span["end"]], names, rng)
        if name is None:
            return None
        pieces.append(text[end : span["start"]])
        start = sum(map(len, pieces))
        pieces.append(name)
        spans.append({**span, "start": start, "end": start + len(name), "text": name})
        end = span["end"]
    pieces.append(text[end:])
    return {"text": "".join(pieces), "spans": spans}


def _drawn(original: str, names: Pools, rng: random.Random) -> str | None:
    script = script_of(original[0])
    given, family = names.given.get(script), names.family.get(script)
    if not given or not family:
        return None
    if unspaced(original[0]):  # written without a space: surname first, as there
        return rng.choice(family) + rng.choice(given)
    words = len(original.split())
    if words == 1:
        return rng.choice(family if rng.random() < 0.5 else given)
    return " ".join([rng.choice(given), *(rng.choice(family) for _ in range(words - 1))])
