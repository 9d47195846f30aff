"""Can the semantic cache tell a paraphrase from a near-miss? Cosine threshold against precision,
wrong hits and recall, with and without the guard (cache/guard.py), on a hand-labelled set.

    .venv/bin/python -m bench.semantic [--home DIR] [--data PATH] [--split NAME]

bench/data/semantic_pairs.jsonl holds question pairs labelled "paraphrase" (deserves the cached
answer) or "near_miss" (deserves another answer), in seven domains. Pairs without a "split" were
written together with the guard's word tables, which were tuned on them; the pairs marked
"split": "blind" were written after the guard was frozen and never tuned on, so the guard's
catch rate on them is the honest estimate of how it does on questions it has not seen. Keep it
that way: after tuning the guard on a blind pair, drop its "split" and write new blind ones.
--data reads another file of pairs (bench/data/cache_truth_pairs.jsonl, issue 18) and --split
keeps only its pairs of that "split" ("tune" or "held_out" there).

For every threshold from 0.70 to 0.98 and both encoders ("torch", the sentence-transformers
reference, and "onnx", the int8 fast path, both from cache.embedder.load_encoder):

- precision: paraphrases among the hits (1.0 when nothing is hit);
- wrong-hit rate: near-misses that would be served / all near-misses;
- recall: paraphrases that would be served / all paraphrases.

The recommended default is the lowest threshold at which, with the guard, the wrong-hit rate
stays under 1% for both encoders, there and at every higher threshold (the highest recall that
keeps the budget). Prints the tables, the per-domain scores at that threshold, whether both
encoders make the same decisions there, and the guard's cost; saves bench/results/semantic.png.
At DEFAULT_THRESHOLD, with the guard, it also prints each encoder's scores by "kind" (wrong hits
per near-miss kind, recall per paraphrase kind), when the pairs have one, and its wrong hits.

Then what the cache serves: int8 similarities, except those within the referee's margin of the
threshold (cache.referee.referee_margin of the shift the export measured on the calibration pairs),
which the fp32 export ("onnx-fp32", torch's numbers) settles. It must make every decision torch
makes; the run prints how far int8 strayed from fp32 on these pairs, which the calibration never
saw (it must stay inside the margin), and how many pairs needed the referee.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import numpy as np

from bench.report import RESULTS, plot_path, table
from bench.semantic_scores import (
    DATA,
    THRESHOLDS,
    WRONG_HIT_BUDGET,
    Pair,
    Scores,
    Similarities,
    by_domain,
    by_field,
    decisions,
    disagreements,
    evaluate,
    load_pairs,
    recommend,
    select,
    served_similarities,
    similarities,
    sweep,
)
from cache.embedder import load_encoder
from cache.encoders import ONNX_DIR, EncoderKind, Shift
from cache.guard import DEFAULT_THRESHOLD, compare, conflict, features
from cache.onnx_model import read_shift
from cache.referee import referee_band_below, referee_margin, settled

KINDS: tuple[EncoderKind, ...] = ("torch", "onnx")


# --- the run ----------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default_home = os.environ.get("OVERSPILL_HOME") or str(RESULTS / "semantic-home")
    parser.add_argument(
        "--home",
        type=Path,
        default=Path(default_home),
        help="where load_encoder keeps the exported ONNX model",
    )
    parser.add_argument("--data", type=Path, default=DATA, help="the labelled pairs (JSON lines)")
    parser.add_argument("--split", help='only the pairs whose "split" is this (default: all)')
    args = parser.parse_args(argv)
    pairs = select(load_pairs(args.data), args.split)
    print(f"{args.data}: {len(pairs)} pairs (split: {args.split or 'all'})")
    sims = {kind: _timed_similarities(kind, args.home, pairs) for kind in KINDS}
    curves = {
        kind: (sweep(pairs, sims[kind], None), sweep(pairs, sims[kind], conflict)) for kind in KINDS
    }
    chosen = recommend([guarded for _, guarded in curves.values()])
    for kind in KINDS:
        print(f"\n{kind}: {len(pairs)} pairs, without / with the guard\n")
        print(
            table(_SWEEP_HEADERS, [_sweep_row(*both) for both in zip(*curves[kind], strict=True)])
        )
    threshold = chosen if chosen is not None else THRESHOLDS[-1]
    _report_threshold(pairs, sims, threshold)
    _report_default(pairs, sims)
    reference = _timed_similarities("onnx-fp32", args.home, pairs)
    _report_refereed(pairs, sims, reference, read_shift(args.home / "models" / ONNX_DIR))
    _report_guard(pairs)
    _plot(curves, threshold)
    verdict = "keeps" if chosen is not None else "never keeps"
    budget = f"wrong hits < {WRONG_HIT_BUDGET:.0%}"
    print(
        f"\nrecommended DEFAULT_THRESHOLD: {threshold:.2f} (with the guard it {verdict} {budget})"
    )
    print(f"cache/guard.py has DEFAULT_THRESHOLD = {DEFAULT_THRESHOLD:.2f}")
    return 0


def _timed_similarities(kind: EncoderKind, home: Path, pairs: Sequence[Pair]) -> Similarities:
    started = time.perf_counter()
    encoder = load_encoder(kind, home)
    loaded = time.perf_counter()
    sims = similarities(encoder, pairs)
    print(
        f"{kind}: loaded in {loaded - started:.1f} s, encoded in "
        f"{time.perf_counter() - loaded:.1f} s"
    )
    return sims


_SWEEP_HEADERS = (
    "threshold",
    "precision",
    "wrong hits",
    "recall",
    "precision +guard",
    "wrong hits +guard",
    "recall +guard",
)


def _sweep_row(bare: Scores, guarded: Scores) -> list[object]:
    return [f"{bare.threshold:.2f}", *_cells(bare), *_cells(guarded)]


def _cells(scores: Scores) -> list[str]:
    wrong = f"{scores.wrong_hit_rate:.1%} ({scores.wrong_hits})"
    return [f"{scores.precision:.3f}", wrong, f"{scores.recall:.1%}"]


def _report_threshold(
    pairs: Sequence[Pair], sims: dict[EncoderKind, Similarities], threshold: float
) -> None:
    for kind in KINDS:
        print(f"\n{kind} at {threshold:.2f}, by domain (pairs: paraphrases+near-misses)\n")
        print(
            table(
                ["domain", "pairs", *_SWEEP_HEADERS[1:]], _domain_rows(pairs, sims[kind], threshold)
            )
        )
    differ = disagreements(pairs, sims["torch"], sims["onnx"], threshold, conflict)
    same = len(pairs) - len(differ)
    print(
        f"\ntorch vs onnx at {threshold:.2f} with the guard: {same}/{len(pairs)} decisions the same"
    )
    for i in differ:
        print(
            f"  torch {sims['torch'][i]:.3f} onnx {sims['onnx'][i]:.3f} {pairs[i].label}: "
            f"{pairs[i].a!r} / {pairs[i].b!r}"
        )


def _report_default(pairs: Sequence[Pair], sims: dict[EncoderKind, Similarities]) -> None:
    """At DEFAULT_THRESHOLD with the guard: scores by kind (if the pairs have kinds), wrong hits."""
    threshold = DEFAULT_THRESHOLD
    for kind in KINDS:
        if any(pair.kind for pair in pairs):
            print(
                f"\n{kind} at {threshold:.2f} with the guard, by kind of change: "
                "wrong hits per near-miss kind, recall per paraphrase kind\n"
            )
            print(
                table(["kind", "label", "pairs", "served", "rate"], _kind_rows(pairs, sims[kind]))
            )
        served = decisions(pairs, sims[kind], threshold, conflict)
        wrong = [
            i
            for i, (p, hit) in enumerate(zip(pairs, served, strict=True))
            if hit and not p.paraphrase
        ]
        print(f"\n{kind} at {threshold:.2f} with the guard: {len(wrong)} wrong hits")
        for i in wrong:
            pair = pairs[i]
            print(f"  {pair.id} {pair.kind} {sims[kind][i]:.3f}: {pair.a!r} | {pair.b!r}")


def _kind_rows(pairs: Sequence[Pair], sims: Similarities) -> list[list[object]]:
    """Wrong hits per near-miss kind, recall per paraphrase kind, at DEFAULT_THRESHOLD."""
    rows: list[list[object]] = []
    for label in ("near_miss", "paraphrase"):
        chosen = [i for i, pair in enumerate(pairs) if pair.label == label]
        subset = [pairs[i] for i in chosen]
        scores = by_field(subset, sims[chosen], DEFAULT_THRESHOLD, conflict, lambda p: p.kind)
        for change, s in scores.items():
            total, served = (
                (s.near_misses, s.wrong_hits) if s.near_misses else (s.paraphrases, s.true_hits)
            )
            rows.append([change, label, total, served, f"{served / total:.1%}"])
    return rows


def _report_refereed(
    pairs: Sequence[Pair],
    sims: dict[EncoderKind, Similarities],
    reference: Similarities,
    measured: Shift,
) -> None:
    """The serving path (int8, refereed by fp32 near the threshold) against torch."""
    threshold, margin = DEFAULT_THRESHOLD, referee_margin(measured.max)
    below = referee_band_below(measured.max)
    strayed = np.abs(sims["onnx"] - reference)
    served = served_similarities(sims["onnx"], reference, threshold, margin, below)
    refereed = sum(settled(float(s), threshold, margin, below) is None for s in sims["onnx"])
    differ = disagreements(pairs, sims["torch"], served, threshold, conflict)
    print(
        f"\nint8 vs fp32 cosine, measured by the export on {measured.pairs} calibration pairs: "
        f"max {measured.max:.4f}, p99 {measured.p99:.4f}, so margin ±{margin}"
    )
    print(
        f"int8 vs fp32 cosine on these pairs: max {strayed.max():.4f}, p99 "
        f"{np.percentile(strayed, 99):.4f} "
        f"({'inside' if strayed.max() < margin else 'OUTSIDE'} the margin); "
        f"fp32 vs torch: max {np.abs(reference - sims['torch']).max():.1e}"
    )
    print(
        f"served (int8, fp32 from {below} below {threshold:.2f} to {margin} above) vs torch "
        f"with the guard: {len(pairs) - len(differ)}/{len(pairs)} decisions the same; "
        f"{refereed} pairs ({refereed / len(pairs):.0%}) refereed"
    )
    for i in differ:
        print(
            f"  torch {sims['torch'][i]:.3f} served {served[i]:.3f} {pairs[i].label}: "
            f"{pairs[i].a!r} / {pairs[i].b!r}"
        )


def _domain_rows(pairs: Sequence[Pair], sims: Similarities, threshold: float) -> list[list[object]]:
    bare, guarded = (by_domain(pairs, sims, threshold, guard) for guard in (None, conflict))
    for split in sorted({pair.split for pair in pairs}):  # "blind": the guard never saw these
        chosen = [i for i, pair in enumerate(pairs) if pair.split == split]
        subset = [pairs[i] for i in chosen]
        bare[f"({split} pairs)"] = evaluate(subset, sims[chosen], threshold)
        guarded[f"({split} pairs)"] = evaluate(subset, sims[chosen], threshold, conflict)
    bare["all"] = evaluate(pairs, sims, threshold)
    guarded["all"] = evaluate(pairs, sims, threshold, conflict)
    return [
        [
            domain,
            f"{scores.paraphrases}+{scores.near_misses}",
            *_cells(scores),
            *_cells(guarded[domain]),
        ]
        for domain, scores in bare.items()
    ]


def _report_guard(pairs: Sequence[Pair]) -> None:
    """What the guard does on its own (any cosine), on the tuned pairs and on the blind ones."""
    rows = []
    for split in sorted({pair.split for pair in pairs}):
        chosen = [pair for pair in pairs if pair.split == split]
        caught = [pair for pair in chosen if not pair.paraphrase and conflict(pair.a, pair.b)]
        passed = [pair for pair in chosen if pair.paraphrase and not conflict(pair.a, pair.b)]
        near, para = sum(not p.paraphrase for p in chosen), sum(p.paraphrase for p in chosen)
        rows.append(
            [
                split,
                f"{len(caught)}/{near} ({len(caught) / near:.0%})",
                f"{len(passed)}/{para} ({len(passed) / para:.0%})",
            ]
        )
    print("\nthe guard alone: near-misses it refuses, paraphrases it lets through\n")
    print(table(["pairs", "near-misses refused", "paraphrases passed"], rows))
    print("\nthe guard's cost, µs (p50 / p99):", _guard_timing(pairs))


def _guard_timing(pairs: Sequence[Pair]) -> str:
    def per_call(call: Callable[[], object], repeat: int = 20) -> float:
        started = time.perf_counter_ns()
        for _ in range(repeat):
            call()
        return (time.perf_counter_ns() - started) / repeat / 1000

    pair_us = sorted(per_call(partial(conflict, p.a, p.b)) for p in pairs)
    read_us = sorted(per_call(partial(features, p.b)) for p in pairs)
    compare_us = sorted(per_call(partial(compare, features(p.a), features(p.b))) for p in pairs)
    return ", ".join(
        f"{name} {_quantile(us, 0.5):.0f} / {_quantile(us, 0.99):.0f}"
        for name, us in (
            ("conflict()", pair_us),
            ("features()", read_us),
            ("compare()", compare_us),
        )
    )


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def _plot(curves: dict[EncoderKind, tuple[list[Scores], list[Scores]]], threshold: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(curves), figsize=(11, 4), sharey=True)
    for ax, (kind, (bare, guarded)) in zip(axes, curves.items(), strict=True):
        for scores, style, suffix in ((bare, "--", ""), (guarded, "-", " +guard")):
            xs = [s.threshold for s in scores]
            ax.plot(xs, [s.precision for s in scores], "C0" + style, label="precision" + suffix)
            ax.plot(xs, [s.recall for s in scores], "C2" + style, label="recall" + suffix)
            ax.plot(
                xs, [s.wrong_hit_rate for s in scores], "C3" + style, label="wrong hits" + suffix
            )
        ax.axvline(threshold, color="grey", linewidth=0.8)
        ax.axhline(WRONG_HIT_BUDGET, color="C3", linewidth=0.6, linestyle=":")
        ax.set_title(f"{kind} encoder (default {threshold:.2f})")
        ax.set_xlabel("cosine threshold")
    axes[0].legend(fontsize=7)
    fig.suptitle("semantic cache on labelled pairs: dashed = cosine only, solid = with the guard")
    fig.tight_layout()
    path = plot_path("semantic")
    fig.savefig(path, dpi=120)
    print(f"\nplot: {path}")


if __name__ == "__main__":
    sys.exit(main())
