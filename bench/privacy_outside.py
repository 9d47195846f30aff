"""How the privacy detectors judge requests nobody here wrote: the outside sets' and the
generated set's report splits (bench/privacy_sets.py), today's code side by side with an
older tree's, judged in one run on the same requests.

    .venv/bin/python -m bench.privacy_outside [--tree OLD] [--split report] [--sample N]

A request with personal data that no detector flags would reach the cloud (a leak); a clean
request that some detector flags stays local for nothing (a false refusal: the overflow the
fleet needed does not happen). Every detector counts (a policy mapping each to a cloud-less
level). Each tree's detectors run in a child process (bench/privacy_verdicts.py) with that
tree first on its path; today's twice, at the names tagger's "precise" threshold (where a
name keeps a request local) and its "thorough" one (where a name sends it redacted: there a
clean request flagged costs a word sent as a placeholder, not the overflow). Prints per set,
then per label, language and request shape; saves bench/results/privacy_outside.{json,png}.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from bench.privacy_sets import ROOT, Row, Split, every_set, rows
from bench.report import RESULTS, plot_path, table

WORKER = Path(__file__).resolve().parent / "privacy_verdicts.py"


def verdicts(tree: Path, bodies: Sequence[dict[str, object]]) -> dict[str, list[list[str]]]:
    """Per names threshold the tree has ("precise", "thorough"), per body, the detectors that
    fired under `tree`'s code."""
    launch = (
        "import runpy, sys; sys.path.insert(0, sys.argv[1]);"
        " runpy.run_path(sys.argv[2], run_name='__main__')"
    )
    feed = "".join(json.dumps(body, ensure_ascii=False) + "\n" for body in bodies)
    done = subprocess.run(
        [sys.executable, "-c", launch, str(tree), str(WORKER)],
        input=feed,
        capture_output=True,
        text=True,
        cwd=tree,
        env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{tree}: the detectors failed\n{done.stderr[-2000:]}")
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    return {kind: [line[kind] for line in lines] for kind in lines[0]} if lines else {}


@dataclass
class Tally:
    pii: int = 0
    leaked: int = 0
    clean: int = 0
    refused: int = 0
    leaked_rows: list[int] = field(default_factory=list)

    def add(self, row: Row, fired: list[str], index: int) -> None:
        if row.pii:
            self.pii += 1
            if not fired:
                self.leaked += 1
                self.leaked_rows.append(index)
        else:
            self.clean += 1
            self.refused += bool(fired)

    def cells(self) -> list[str]:
        return [_share(self.leaked, self.pii), _share(self.refused, self.clean)]


def _share(part: int, whole: int) -> str:
    return "-" if whole == 0 else f"{part}/{whole} ({100 * part / whole:.1f}%)"


def tallies(judged: Sequence[Row], fired: Sequence[list[str]], key: str) -> dict[str, Tally]:
    """Tallies by the row's set, language, shape or label (a row counts once per label)."""
    out: dict[str, Tally] = defaultdict(Tally)
    for index, (row, found) in enumerate(zip(judged, fired, strict=True)):
        groups = {
            "set": [row.set],
            "lang": [f"{row.set}:{row.lang}"],
            "shape": [row.shape],
            "label": [f"{row.set}:{label}" for label in row.classes] or [f"{row.set}:(clean)"],
        }[key]
        for group in groups:
            out[group].add(row, found, index)
    return dict(sorted(out.items()))


def render(by_tree: dict[str, list[list[str]]], judged: Sequence[Row], key: str) -> str:
    trees = list(by_tree)
    per_tree = {tree: tallies(judged, by_tree[tree], key) for tree in trees}
    groups = list(per_tree[trees[0]])
    headers = [key]
    for tree in trees:
        headers += [f"{tree}: PII that leaked", f"{tree}: clean refused"]
    body = [
        [group, *[c for tree in trees for c in per_tree[tree][group].cells()]] for group in groups
    ]
    return table(headers, body)


def plot(by_tree: dict[str, list[list[str]]], judged: Sequence[Row]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sets = list(tallies(judged, next(iter(by_tree.values())), "set"))
    fig, axes = plt.subplots(1, 2, figsize=(14, 4.8))
    width = 0.8 / len(by_tree)
    for n, (tree, fired) in enumerate(by_tree.items()):
        counted = tallies(judged, fired, "set")
        leaks = [100 * counted[s].leaked / max(1, counted[s].pii) for s in sets]
        refusals = [100 * counted[s].refused / max(1, counted[s].clean) for s in sets]
        spots = [x + (n - (len(by_tree) - 1) / 2) * width for x in range(len(sets))]
        axes[0].bar(spots, leaks, width, label=tree)
        axes[1].bar(spots, refusals, width, label=tree)
    for ax, title, goal in (
        (axes[0], "requests with personal data that reach the cloud (%)", 1),
        (axes[1], "clean requests refused the cloud (%)", 3),
    ):
        ax.axhline(goal, color="red", linestyle="--", linewidth=1, label=f"goal {goal}%")
        ax.set_xticks(range(len(sets)), sets, rotation=25, ha="right")
        ax.set_title(title)
        ax.legend()
    fig.tight_layout()
    path = plot_path("privacy_outside")
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, help="an older tree to judge beside this one")
    parser.add_argument("--split", choices=["tune", "report"], default="report")
    parser.add_argument("--sample", type=int, default=0, help="rows per set (0: all)")
    parser.add_argument(
        "--show-leaks",
        type=int,
        default=0,
        help="print N leaked texts per set (tune split only: never tune on report errors)",
    )
    args = parser.parse_args(argv)
    split: Split = args.split
    judged = [row for name in every_set(split) for row in rows(name, split, args.sample)]
    trees = {"today": ROOT, **({"before": args.tree.resolve()} if args.tree else {})}
    bodies = [row.body for row in judged]
    with ThreadPoolExecutor(len(trees)) as pool:
        jobs = {name: pool.submit(verdicts, tree, bodies) for name, tree in trees.items()}
        by_tree = {
            f"{name}, {kind}" if kind != "precise" or name == "today" else name: fired
            for name, job in reversed(jobs.items())
            for kind, fired in job.result().items()
        }
    print(f"{len(judged)} requests, {split} split\n")
    for key in ("set", "label", "lang", "shape"):
        print(render(by_tree, judged, key) + "\n")
    if args.show_leaks:
        _show_leaks(judged, by_tree["today, precise"], args.show_leaks)
    RESULTS.mkdir(parents=True, exist_ok=True)
    summary = {
        tree: {s: vars(t) | {"leaked_rows": None} for s, t in tallies(judged, f, "set").items()}
        for tree, f in by_tree.items()
    }
    (RESULTS / "privacy_outside.json").write_text(json.dumps(summary, indent=1))
    plot(by_tree, judged)
    return 0


def _show_leaks(judged: Sequence[Row], fired: Sequence[list[str]], per_set: int) -> None:
    shown: dict[str, int] = defaultdict(int)
    for row, found in zip(judged, fired, strict=True):
        if row.pii and not found and shown[row.set] < per_set:
            shown[row.set] += 1
            print(f"LEAK {row.set} {row.lang} {row.classes}: {json.dumps(row.body)[:300]}")


if __name__ == "__main__":
    sys.exit(main())
