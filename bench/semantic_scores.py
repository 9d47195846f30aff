"""Scores of the semantic cache's decisions on labelled question pairs (pure, but for reading
the pairs and encoding them): would it serve pair.b with pair.a's answer, and how often is that
right, per threshold, per field, per encoder. bench/semantic.py runs and reports them."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from cache.encoders import Encoder
from cache.referee import settled

DATA = Path(__file__).resolve().parent / "data" / "semantic_pairs.jsonl"
THRESHOLDS = tuple(round(0.70 + 0.01 * step, 2) for step in range(29))  # 0.70 ... 0.98
WRONG_HIT_BUDGET = 0.01

Guard = Callable[[str, str], "str | None"]
Similarities = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Pair:
    a: str  # the cached question
    b: str  # the new one
    label: str  # "paraphrase" | "near_miss"
    domain: str
    note: str
    split: str = "dev"  # "blind": written after the guard was frozen
    id: str = ""
    kind: str = ""  # the change from a to b ("number", "typos", ...), where the file has one

    @property
    def paraphrase(self) -> bool:
        return self.label == "paraphrase"


@dataclass(frozen=True)
class Scores:
    threshold: float
    paraphrases: int
    near_misses: int
    true_hits: int  # paraphrases served from the cache
    wrong_hits: int  # near-misses served from the cache

    @property
    def precision(self) -> float:
        hits = self.true_hits + self.wrong_hits
        return self.true_hits / hits if hits else 1.0

    @property
    def wrong_hit_rate(self) -> float:
        return self.wrong_hits / self.near_misses if self.near_misses else 0.0

    @property
    def recall(self) -> float:
        return self.true_hits / self.paraphrases if self.paraphrases else 1.0


def load_pairs(path: Path = DATA) -> list[Pair]:
    pairs = [Pair(**json.loads(line)) for line in path.read_text().splitlines() if line.strip()]
    wrong = [p for p in pairs if p.label not in ("paraphrase", "near_miss")]
    if wrong:
        raise ValueError(f"{path}: unknown label {wrong[0].label!r} for {wrong[0].a!r}")
    return pairs


def select(pairs: Sequence[Pair], split: str | None) -> list[Pair]:
    """The pairs of one split (all of them for None)."""
    chosen = [pair for pair in pairs if split is None or pair.split == split]
    if not chosen:
        raise ValueError(f"no pairs with split {split!r}")
    return chosen


def similarities(encoder: Encoder, pairs: Sequence[Pair]) -> Similarities:
    """Cosine of each pair: each distinct text encoded once, rows are L2-normalised."""
    texts = sorted({text for pair in pairs for text in (pair.a, pair.b)})
    vectors = encoder.encode(texts)
    row = {text: i for i, text in enumerate(texts)}
    a = vectors[[row[pair.a] for pair in pairs]]
    b = vectors[[row[pair.b] for pair in pairs]]
    cosines: Similarities = (a * b).sum(axis=1).astype(np.float32)
    return cosines


def decisions(
    pairs: Sequence[Pair], sims: Similarities, threshold: float, guard: Guard | None = None
) -> list[bool]:
    """Would the cache serve pair.b with pair.a's answer? The guard runs only above threshold."""
    return [
        bool(sim >= threshold) and (guard is None or guard(pair.a, pair.b) is None)
        for pair, sim in zip(pairs, sims, strict=True)
    ]


def evaluate(
    pairs: Sequence[Pair], sims: Similarities, threshold: float, guard: Guard | None = None
) -> Scores:
    served = decisions(pairs, sims, threshold, guard)
    hits = [pair for pair, hit in zip(pairs, served, strict=True) if hit]
    return Scores(
        threshold=threshold,
        paraphrases=sum(pair.paraphrase for pair in pairs),
        near_misses=sum(not pair.paraphrase for pair in pairs),
        true_hits=sum(pair.paraphrase for pair in hits),
        wrong_hits=sum(not pair.paraphrase for pair in hits),
    )


def sweep(pairs: Sequence[Pair], sims: Similarities, guard: Guard | None) -> list[Scores]:
    return [evaluate(pairs, sims, threshold, guard) for threshold in THRESHOLDS]


def recommend(curves: Sequence[Sequence[Scores]]) -> float | None:
    """The lowest threshold from which on every curve keeps the wrong-hit budget."""
    safe = [
        all(c[i].wrong_hit_rate < WRONG_HIT_BUDGET for c in curves) for i in range(len(THRESHOLDS))
    ]
    for i, threshold in enumerate(THRESHOLDS):
        if all(safe[i:]):
            return threshold
    return None


def by_domain(
    pairs: Sequence[Pair], sims: Similarities, threshold: float, guard: Guard | None
) -> dict[str, Scores]:
    return by_field(pairs, sims, threshold, guard, lambda pair: pair.domain)


def by_field(
    pairs: Sequence[Pair],
    sims: Similarities,
    threshold: float,
    guard: Guard | None,
    field: Callable[[Pair], str],
) -> dict[str, Scores]:
    scores: dict[str, Scores] = {}
    for value in sorted({field(pair) for pair in pairs}):
        chosen = [i for i, pair in enumerate(pairs) if field(pair) == value]
        scores[value] = evaluate([pairs[i] for i in chosen], sims[chosen], threshold, guard)
    return scores


def disagreements(
    pairs: Sequence[Pair], first: Similarities, second: Similarities, threshold: float, guard: Guard
) -> list[int]:
    """Indices of the pairs that two encoders decide differently."""
    one, other = (
        decisions(pairs, first, threshold, guard),
        decisions(pairs, second, threshold, guard),
    )
    return [i for i, (x, y) in enumerate(zip(one, other, strict=True)) if x != y]


def served_similarities(
    fast: Similarities,
    reference: Similarities,
    threshold: float,
    margin: float,
    below: float | None = None,
) -> Similarities:
    """What the cache compares with the threshold: the fast similarity when it is clear, the
    reference's when it is within `margin` above the threshold or `below` under it (cache.judge's
    rule)."""
    borderline = [settled(float(sim), threshold, margin, below) is None for sim in fast]
    served: Similarities = np.where(borderline, reference, fast).astype(np.float32)
    return served
