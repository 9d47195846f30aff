"""How well the personal-data detectors find what a request carries, on a labelled corpus
written for it (bench/data/privacy_corpus.jsonl), and what detection costs a request.

    .venv/bin/python -m bench.privacy [--half held|tune|all] [--show-misses]

Per class: requests of the half that carry it, found (TP), missed (FN), flagged without
carrying it (FP), precision and recall; the clean requests (near-misses and ordinary prompts)
flagged by any detector; the detection time every request pays on arrival (payload walk,
normalisation, the pattern detectors; p50/p99 over the half); and what a cloud-bound request at
a redacting level pays on top (the names model, which reads only requests about to leave, and
the redaction; a request served locally never meets it, tests/unit/proxy/test_pipeline_names.py
shows it). Figures are the held-back half's unless --half says otherwise: the detectors may be
tuned on the "tune" half only. Saves bench/results/privacy.png (precision and recall per
class). Detectors read the payload as the proxy does (policies/payload.py): every string,
normalised, media data skipped.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from bench.privacy_corpus import CLASSES, Case, Score, clean_flagged, counts, load, scores
from bench.report import plot_path, table
from policies.entities import ENTITY_DETECTORS, Found
from policies.payload import payload_of
from policies.pii import DETECTORS, scan
from policies.quasi import held_back
from policies.redaction import NotRedactable, redacted_body
from proxy.legs.ner import Ner

ENABLED = tuple(DETECTORS)
EVERY_DETECTOR = (*DETECTORS, *ENTITY_DETECTORS)


def entry_detected(body: dict[str, Any]) -> list[str]:
    """What the pattern detectors find: what every request pays, when it arrives."""
    return list(scan(payload_of(body).texts, ENABLED).detected)


def named(names: Ner, body: dict[str, Any], held: Sequence[str] = ()) -> Found:
    """What the names models' detectors find (as the cloud leg runs them, without its thread
    and timeout), with the quasi-identifiers `held` for them: only a request about to leave
    pays it."""
    return names.findings(payload_of(body), (*ENTITY_DETECTORS, *held))


def detected(names: Ner, body: dict[str, Any]) -> list[str]:
    """Every detector that counts before the request leaves: the pattern scan's, but the
    quasi-identifiers it holds for the names screen (policies/quasi.py), then that screen's."""
    fired = entry_detected(body)
    held = held_back(fired, EVERY_DETECTOR)
    return [name for name in fired if name not in held] + named(names, body, held).fired


def leaving(names: Ner, body: dict[str, Any]) -> None:
    """What a request bound for the cloud at a redacting level pays on top of its arrival's
    scan: the names model, then the redaction (as the cloud leg runs them)."""
    values = named(names, body).values
    with contextlib.suppress(NotRedactable):
        redacted_body(body, ENABLED, values=values)


def latencies_ms(
    cases: Iterable[Case], work: Callable[[dict[str, Any]], object], repeat: int = 5
) -> list[float]:
    """Per request, the best of `repeat` runs of `work` (the machine's noise left out)."""
    times = []
    for case in cases:
        best = float("inf")
        for _ in range(repeat):
            began = time.perf_counter()
            work(case.body)
            best = min(best, time.perf_counter() - began)
        times.append(best * 1000)
    return times


def percentiles(times: list[float]) -> tuple[float, float]:
    ordered = sorted(times)
    return statistics.median(ordered), ordered[
        min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))
    ]


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def render(table_scores: dict[str, Score], carried: dict[str, int]) -> str:
    rows = []
    for name in CLASSES:
        score = table_scores[name]
        detector = name if name in EVERY_DETECTOR else "(none yet)"
        counted = [carried[name], score.tp, score.fn, score.fp]
        rows.append([name, detector, *counted, _ratio(score.precision), _ratio(score.recall)])
    headers = ["class", "detector", "requests", "TP", "FN", "FP", "precision", "recall"]
    return table(headers, rows)


def plot(table_scores: dict[str, Score], half: str, costs: dict[str, tuple[float, float]]) -> None:
    """Precision and recall per class, and beside them what detection costs a request
    (`costs`: label -> (p50, p99) in ms)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(CLASSES)
    xs = range(len(names))
    precision = [table_scores[n].precision or 0.0 for n in names]
    recall = [table_scores[n].recall or 0.0 for n in names]
    fig, (ax, cost) = plt.subplots(1, 2, figsize=(15, 4.8), width_ratios=(3, 1))
    ax.bar([x - 0.2 for x in xs], precision, 0.4, label="precision")
    ax.bar([x + 0.2 for x in xs], recall, 0.4, label="recall")
    ax.set_xticks(list(xs), names, rotation=35, ha="right")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"Personal-data detectors on the labelled corpus ({half} half)")
    ax.legend()
    labels = list(costs)
    spots = range(len(labels))
    cost.bar([x - 0.2 for x in spots], [costs[k][0] for k in labels], 0.4, label="p50")
    cost.bar([x + 0.2 for x in spots], [costs[k][1] for k in labels], 0.4, label="p99")
    cost.set_xticks(list(spots), labels, rotation=20, ha="right")
    cost.set_ylabel("ms per request")
    cost.set_title("What detection adds")
    cost.legend()
    fig.tight_layout()
    path = plot_path("privacy")
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", choices=["held", "tune", "all"], default="held")
    parser.add_argument("--show-misses", action="store_true", help="list the case ids")
    args = parser.parse_args(argv)
    cases = [c for c in load() if args.half == "all" or c.half == args.half]
    names = Ner()
    names.people(["warm the model up"])

    def judged(body: dict[str, Any]) -> list[str]:
        return detected(names, body)

    found = scores(cases, judged)
    print(f"{len(cases)} requests ({args.half} half of bench/data/privacy_corpus.jsonl)\n")
    print(render(found, dict(counts(cases))))
    flagged, clean = clean_flagged(cases, judged)
    print(f"\nclean requests flagged by a detector: {flagged} of {clean}")
    arrival = percentiles(latencies_ms(cases, entry_detected))
    print(
        "every request, on arrival (pattern detectors):"
        f" p50 {arrival[0]:.3f} ms, p99 {arrival[1]:.3f} ms"
    )
    print("added for a request served locally: nothing (the names model never reads it)")
    leaving_cost = percentiles(latencies_ms(cases, lambda body: leaving(names, body)))
    print(
        "added for a cloud-bound request (names model, and redaction at a redacting level):"
        f" p50 {leaving_cost[0]:.3f} ms, p99 {leaving_cost[1]:.3f} ms"
    )
    costs = {"every request, on arrival": arrival, "cloud-bound, on top": leaving_cost}
    if args.show_misses:
        for name in CLASSES:
            score = found[name]
            if score.missed or score.false:
                print(f"{name}: missed {score.missed}; flagged without {score.false}")
    plot(found, args.half, costs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
