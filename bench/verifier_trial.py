"""The answer verifier (cache/verifier.py) offline, on one split of the labelled pairs: recall
and wrong hits for a candidate that passes a cosine threshold (fp32 embeddings), the guard, and
the verifier at p or more, beside the guard alone; then every pair the verifier got wrong at
the chosen setting, and what one verdict costs.

    .venv/bin/python -m bench.verifier_trial [--model DIR] [--split held_out]

The verifier is made without the held-out split (cache/verifier_training.py drops it), so a
figure on it is a figure on questions the verifier never saw. Through the real proxy:
bench/cache_truth.py.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench.report import table
from bench.semantic_scores import DATA
from cache.embedder import load_encoder
from cache.guard import conflict
from cache.verifier import AGREES, VERIFIER_DIR, agreement, load_verifier
from policies.model import DEFAULT_SEMANTIC_THRESHOLD
from proxy.home import overspill_home

TRUTH = DATA.parent / "cache_truth_pairs.jsonl"


def rows_of(split: str, path: Path = TRUTH) -> list[dict[str, str]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [row for row in rows if row.get("split") == split]


def sweep(rows: Sequence[dict[str, str]], cosines: np.ndarray, verdicts: np.ndarray) -> str:
    guarded = np.array([conflict(r["a"], r["b"]) is None for r in rows])
    labels = np.array([r["label"] == "paraphrase" for r in rows])
    lines = []
    for threshold in (0.65, 0.70, 0.75, 0.80, 0.85, 0.90):
        for least in (None, 0.5, 0.8, 0.9):
            served = (cosines >= threshold) & guarded
            if least is not None:
                served &= verdicts >= least
            recall = f"{int((served & labels).sum())}/{int(labels.sum())}"
            wrong = f"{int((served & ~labels).sum())}/{int((~labels).sum())}"
            lines.append((threshold, "guard only" if least is None else least, recall, wrong))
    return table(("cosine >=", "verifier p >=", "recall", "wrong hits"), lines)


def mistakes(
    rows: Sequence[dict[str, str]], cosines: np.ndarray, verdicts: np.ndarray, threshold: float
) -> str:
    lines = []
    for row, cosine, verdict in zip(rows, cosines, verdicts, strict=True):
        if cosine < threshold or conflict(row["a"], row["b"]) is not None:
            continue
        served = verdict >= AGREES
        if served != (row["label"] == "paraphrase"):
            kind = row.get("kind", "")
            lines.append((kind, f"{cosine:.2f}", f"{verdict:.2f}", row["a"][:60], row["b"][:60]))
    return table(("kind", "cosine", "p", "a", "b"), lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=overspill_home() / "models" / VERIFIER_DIR)
    parser.add_argument("--split", default="held_out")
    parser.add_argument("--threshold", type=float, default=DEFAULT_SEMANTIC_THRESHOLD)
    args = parser.parse_args(argv)
    rows = rows_of(args.split)
    encoder = load_encoder("onnx-fp32", overspill_home())
    first = encoder.encode([r["a"] for r in rows])
    second = encoder.encode([r["b"] for r in rows])
    cosines = (first * second).sum(axis=1)
    verifier = load_verifier(args.model)
    verdicts = agreement(verifier, [(r["a"], r["b"]) for r in rows])
    print(f"{TRUTH.name}, split {args.split}: {len(rows)} pairs\n")
    print(sweep(rows, cosines, verdicts))
    print(f"\nwhat the verifier got wrong at cosine >= {args.threshold}, p >= {AGREES}:")
    print(mistakes(rows, cosines, verdicts, args.threshold))
    costs = []
    for row in rows[:100]:
        start = time.perf_counter()
        agreement(verifier, [(row["a"], row["b"])])
        costs.append(time.perf_counter() - start)
    costs.sort()
    print(
        f"\none pair (both readings): p50 {1000 * costs[50]:.2f} ms, p99 {1000 * costs[98]:.2f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
