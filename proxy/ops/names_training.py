"""`overspill names-model`: train the multilingual names tagger (proxy/legs/name_tagger.py: its
head and its encoder's adapters) into policies/names_model/, where the package ships it;
`--check` says whether the shipped one was made from today's inputs.

Trained only on what others wrote: the `tune` splits of the labelled sets in
../shared/data/outside (UNER's nine languages, KLUE-NER, Stockmark's Japanese Wikipedia,
MEDDOCAN's Spanish clinical records, Presidio's synthetic set; each folder's README gives source
and licence: CC BY-SA sets, so the head and adapters are shared under CC BY-SA too). The
`report` splits are never read here. A fifth of the tune rows (by a hash of the text) is held
apart to choose the thresholds; the tagger shipped is then trained on all of them. The
encoder's lower layers read every row once (about 2 minutes); the upper layers' adapters and
the head learn in torch (the `export` extra), seeded: about 20 minutes in all on 2 cores, for
the two trainings.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import mean
from typing import Any

import numpy as np
import numpy.typing as npt

from proxy.legs import encoder
from proxy.legs.e5_file import default_path
from proxy.legs.encoder import SEGMENT_PIECES, Encoder
from proxy.legs.name_tagger import ADAPTERS_FILE, FOLDER, HEAD_FILE, MANIFEST_FILE
from proxy.ops import names_learning
from proxy.ops.names_learning import Example, Learnt

OUTSIDE = Path(__file__).resolve().parents[3] / "shared" / "data" / "outside"


@dataclass(frozen=True)
class Recipe:
    format: int = 3  # 3: a head and adapters (2: a head alone; 1: a CRF)
    # set -> the span labels that are a person's name in it
    sets: tuple[tuple[str, tuple[str, ...]], ...] = (
        ("uner", ("PER",)),
        ("klue-ner", ("PS",)),
        ("stockmark-ner-ja", ("人名",)),
        ("meddocan", ("NOMBRE_SUJETO_ASISTENCIA", "NOMBRE_PERSONAL_SANITARIO")),
        ("presidio-synth", ("PERSON",)),
    )
    rows_per_set: int = 5000  # the first this many of a set's tune rows
    learning: names_learning.Settings = field(default_factory=names_learning.Settings)
    dev_share: int = 5  # one row in this many (by hash) chooses the thresholds
    # Two thresholds, each the lowest (the most names found) whose false flags on the
    # held-apart rows without a name stay within a share, on average over the sets. "precise"
    # (the goal for clean requests refused: 3%) serves a policy that keeps a request
    # with a name local, where a false flag costs the overflow; "thorough" (10%) one that sends
    # it redacted, where a false flag costs a word replaced by a placeholder.
    refusal_goals: tuple[tuple[str, float], ...] = (("precise", 0.03), ("thorough", 0.10))
    thresholds: tuple[float, ...] = (0.98, 0.95, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1)


def outside_folder() -> Path:
    return Path(os.environ.get("OVERSPILL_OUTSIDE_DATA") or OUTSIDE)


def tune_rows(folder: Path, recipe: Recipe) -> Iterator[tuple[str, dict[str, Any], bool]]:
    """(set, row, held apart for the thresholds) for the recipe's tune rows of each set."""
    for name, _ in recipe.sets:
        with (folder / name / f"{name}.tune.jsonl").open(encoding="utf-8") as lines:
            for _, line in zip(range(recipe.rows_per_set), lines, strict=False):
                row = json.loads(line)
                digest = hashlib.sha256(f"dev:{row['text']}".encode()).digest()
                yield name, row, int.from_bytes(digest[:8], "big") % recipe.dev_share == 0


def examples(folder: Path, recipe: Recipe, reader: Encoder, batch: int = 64) -> list[Example]:
    """Every tune row as the encoder's untuned lower layers read it (its first SEGMENT_PIECES
    pieces: the rows are sentences and lines), each piece marked when a name overlaps it."""
    rows = list(tune_rows(folder, recipe))
    below = recipe.learning.tuned_from - 1
    out = []
    for at in range(0, len(rows), batch):
        chunk = rows[at : at + batch]
        read = [
            (ids[:SEGMENT_PIECES], spans[:SEGMENT_PIECES])
            for ids, spans in reader.pieces([row["text"] for _, row, _ in chunk])
        ]
        lowered = reader.lower([ids for ids, _ in read], below)
        for (name, row, apart), (_, spans), inputs in zip(chunk, read, lowered, strict=True):
            marks = _in_names(row, dict(recipe.sets)[name], spans.tolist())
            out.append(Example(name, apart, inputs.astype(np.float16), marks))
    return out


def _in_names(
    row: dict[str, Any], labels: Sequence[str], spans: list[tuple[int, int]]
) -> npt.NDArray[np.bool_]:
    people = [(s["start"], s["end"]) for s in row["spans"] if s["label"] in labels]
    return np.array([any(a < end and start < b for a, b in people) for start, end in spans], bool)


def leaks_and_refusals(
    learnt: Learnt, held: Sequence[Example], recipe: Recipe, reader: Encoder
) -> dict[float, dict[str, tuple[float, float]]]:
    """Per threshold, per set: the share of held-apart rows with a name the tagger misses, and
    of rows without one it flags."""
    peaks = [
        (one.set, bool(one.names.any()), peak)
        for one, peak in zip(held, names_learning.peaks(learnt, held, reader), strict=True)
    ]
    out: dict[float, dict[str, tuple[float, float]]] = {}
    for threshold in recipe.thresholds:
        out[threshold] = {}
        for name, _ in recipe.sets:
            mine = [(gold, peak >= threshold) for n, gold, peak in peaks if n == name]
            named = [flag for gold, flag in mine if gold]
            clean = [flag for gold, flag in mine if not gold]
            out[threshold][name] = (
                round(1 - sum(named) / max(1, len(named)), 4),
                round(sum(clean) / max(1, len(clean)), 4),
            )
    return out


def chosen(
    figures: dict[float, dict[str, tuple[float, float]]], recipe: Recipe, goal: float
) -> float:
    """The lowest threshold whose mean share of clean rows flagged is within `goal`."""
    within = [
        threshold
        for threshold in recipe.thresholds
        if mean(refusal for _, refusal in figures[threshold].values()) <= goal
    ]
    return min(within, default=max(recipe.thresholds))


def digest_of(folder: Path, recipe: Recipe) -> str:
    """What the tagger is made from: the recipe, the tune splits, the code that reads a text
    into states and the code that trains the head and adapters (a change to either needs a
    tagger trained anew), and the encoder's weights."""
    digest = hashlib.sha256(json.dumps(asdict(recipe)).encode())
    for name, _ in recipe.sets:
        digest.update((folder / name / f"{name}.tune.jsonl").read_bytes())
    for module in (encoder, names_learning):
        digest.update(Path(str(module.__file__)).read_bytes())
    digest.update(hashlib.sha256(default_path().read_bytes()).digest())
    return digest.hexdigest()


def make(data: Path, target: Path, recipe: Recipe = Recipe()) -> dict[str, Any]:
    reader = Encoder()
    everything = examples(data, recipe, reader)
    kept = [one for one in everything if not one.held_apart]
    trial = names_learning.learnt(kept, reader, recipe.learning)
    held = [one for one in everything if one.held_apart]
    figures = leaks_and_refusals(trial, held, recipe, reader)
    shipped = names_learning.learnt(everything, reader, recipe.learning)
    target.mkdir(parents=True, exist_ok=True)
    names_learning.save(shipped, target / HEAD_FILE, target / ADAPTERS_FILE)
    manifest = {
        "thresholds": {name: chosen(figures, recipe, goal) for name, goal in recipe.refusal_goals},
        "recipe": asdict(recipe),
        "inputs": digest_of(data, recipe),
        "held_apart_leak_and_refusal": {str(k): v for k, v in figures.items()},
    }
    (target / MANIFEST_FILE).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return manifest


def add_parser(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "names-model",
        help="train the multilingual names tagger from the outside sets' tune splits",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    parser.add_argument("--check", action="store_true", help="is the shipped model current?")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    data = outside_folder()
    if not data.is_dir():
        print(f"overspill names-model: no labelled sets at {data}", file=sys.stderr)
        return 1
    recipe = Recipe()
    if args.check:
        shipped = json.loads((FOLDER / MANIFEST_FILE).read_text(encoding="utf-8"))
        current = shipped.get("inputs") == digest_of(data, recipe)
        print(f"{FOLDER}: {'current' if current else 'made from other inputs'}")
        return 0 if current else 1
    manifest = make(data, FOLDER, recipe)
    print(json.dumps(manifest["held_apart_leak_and_refusal"], indent=1))
    print(f"{FOLDER}: thresholds {manifest['thresholds']}")
    return 0
