"""Where the answer verifier lives ($OVERSPILL_HOME/models), whether the one there is current,
and making it: in a child process (torch never enters a server), at the lowest CPU priority (a
proxy that makes it at its first start keeps serving meanwhile), under a file lock (one maker
per home), into a staging directory renamed into place (a reader sees a whole model or none).

It is made from the labelled pairs in the repository's bench/data (all but their held-out
split): a change in them, or in the edits that make more pairs (cache/verifier_pairs.py), makes
it anew. An install without them uses a verifier made elsewhere, copied into the folder.

Then its fast copy (cache/verifier_fast.py), in a second child, under the same lock: the int8
quantisation of whatever verifier is there, measured against it on this CPU (~1 minute).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np

from cache.calibration_pairs import PAIRS
from cache.encoders import TOKENIZER_FILE, EmbedderError, load_tokenizer, log
from cache.onnx_model import discard, exclusive, export_missing, quantise, run_child, sweep
from cache.question_templates import TEMPLATES
from cache.verifier import (
    AGREES,
    MODEL_FILE,
    VERIFIER_DIR,
    OnnxVerifier,
    ScoresPairs,
    logit,
    session,
)
from cache.verifier_fast import BAND, FAST_FILE, FAST_MANIFEST, RECIPE, Stray, exact_digest
from cache.verifier_fast import current as fast_current
from cache.verifier_pairs import slot_pairs
from cache.verifier_training import MANIFEST_FILE, recipe
from cache.verifier_training import build as train

_DATA = Path(__file__).resolve().parent.parent / "bench" / "data"
LABELLED = (_DATA / "cache_truth_pairs.jsonl", _DATA / "semantic_pairs.jsonl")
_MAKE_TIMEOUT_S = 3600  # ~8 minutes on 2 idle cores; at the lowest priority beside traffic


def verifier_folder(home: Path) -> Path:
    return home / "models" / VERIFIER_DIR


def complete(folder: Path, labelled: Sequence[Path] = LABELLED) -> bool:
    """A whole model, made from these labelled files as they are now (any, when they are not
    here to compare with)."""
    try:
        written = json.loads((folder / MANIFEST_FILE).read_text())
    except (OSError, ValueError):
        return False
    whole = all((folder / file).is_file() for file in (MODEL_FILE, TOKENIZER_FILE))
    if not all(path.is_file() for path in labelled):
        return whole
    return whole and written == recipe(labelled)


def make(folder: Path, labelled: Sequence[Path] = LABELLED) -> bool:
    """Make the verifier unless a current one is there, then its fast copy unless that is
    current; True if this call made the verifier. Blocks for minutes: call it off the event
    loop. A child does each, lock to rename, so one that a stopped proxy started still
    finishes, for the next start."""
    made = _train(folder, labelled)
    _make_fast(folder)
    return made


def _train(folder: Path, labelled: Sequence[Path]) -> bool:
    if complete(folder, labelled):
        return False
    missing = export_missing() + [str(path) for path in labelled if not path.is_file()]
    if missing:
        raise EmbedderError(
            f"the answer verifier is not in {folder}, and making it (once) needs "
            f"{', '.join(missing)}: install 'overspill[export]' in a clone of the repository, "
            "or copy a verifier made elsewhere into that folder"
        )
    folder.parent.mkdir(parents=True, exist_ok=True)
    log.warning("cache: making the answer verifier in %s (once: minutes)", folder)
    started = time.monotonic()
    # Lowest priority: a proxy making it at its first start goes on serving meanwhile. Torch
    # may take every core for it (OMP_NUM_THREADS is for the embedder's export).
    command = ["nice", "-n", "19", "env", "-u", "OMP_NUM_THREADS", sys.executable, "-m"]
    command += ["cache.verifier_model", "build", str(folder), *map(str, labelled)]
    lines = run_child(command, _MAKE_TIMEOUT_S, "making the answer verifier")
    log.warning("cache: answer verifier ready in %.0f s", time.monotonic() - started)
    return bool(lines) and lines[-1] == _MADE


_MADE = "made"
_FAST_TIMEOUT_S = 600  # ~20 s on 2 idle cores


def _make_fast(folder: Path) -> None:
    """The int8 copy the verifier reads first; without it (no quantiser here, or making it
    failed) the verifier reads fp32 only: slower, the same verdicts."""
    if fast_current(folder, MODEL_FILE):
        return
    if "onnx" in export_missing():
        log.warning("cache: no quantiser (the export extra): the answer verifier reads fp32 only")
        return
    command = ["nice", "-n", "19", sys.executable, "-m", "cache.verifier_model"]
    command += ["fast", str(folder)]
    try:
        lines = run_child(command, _FAST_TIMEOUT_S, "making the verifier's fast copy")
    except EmbedderError:
        log.exception("cache: the answer verifier reads fp32 only")
        return
    log.warning("cache: the answer verifier's fast copy: %s", lines[-1] if lines else "?")


def build_fast(folder: Path) -> str:
    """In the child: make the fast copy unless a current one is there (made meanwhile)."""
    with exclusive(folder.parent / f".{folder.name}.lock"):
        if fast_current(folder, MODEL_FILE):
            return "present"
        stray = make_fast(folder, MODEL_FILE)
        return f"made; int8 read a pair up to {stray.max} logits below fp32 near the boundary"


def build(folder: Path, labelled: Sequence[Path]) -> bool:
    """In the child: train into a staging directory and rename it into place, unless a current
    verifier is there (made by another process meanwhile); True if it made one."""
    with exclusive(folder.parent / f".{folder.name}.lock"):
        if complete(folder, labelled):
            return False
        sweep(folder)
        discard(folder)
        staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.staging-", dir=folder.parent))
        try:
            train(staging, labelled)
            staging.rename(folder)  # a reader sees a whole model or none
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return True


# --- the fast copy (in the child process) -----------------------------------------------------


def calibration() -> list[tuple[str, str]]:
    templated = [(pair.first, pair.second) for pair in slot_pairs(TEMPLATES, 400, seed=27)]
    pairs = [*PAIRS, *templated]
    return [*pairs, *((b, a) for a, b in pairs)]


def measure(exact: ScoresPairs, fast: ScoresPairs, pairs: Sequence[tuple[str, str]]) -> Stray:
    """How far `fast` moves a reading from `exact`'s, where that can flip a decision."""
    reference = [logit(float(p)) for p in exact.scores(pairs)]
    moved = [
        max(ref - logit(float(p)), 0.0)
        for p, ref in zip(fast.scores(pairs), reference, strict=True)
        if ref >= logit(AGREES) - BAND
    ]
    if not moved:
        raise ValueError("no calibration pair lies near the boundary")
    return Stray(_up(max(moved)), _up(float(np.percentile(moved, 99))), len(moved))


def _up(value: float) -> float:
    """Rounded up to thousandths: a margin sized from it never comes out below what was seen."""
    return math.ceil(value * 1000) / 1000


def make_fast(folder: Path, model_file: str) -> Stray:
    """In a child process: quantise the verifier in `folder`, measure the copy against it, and
    write the manifest last (a copy without one is not used)."""
    (folder / FAST_MANIFEST).unlink(missing_ok=True)
    staging = folder / f".{FAST_FILE}.staging"
    quantise(folder / model_file, staging)
    os.replace(staging, folder / FAST_FILE)
    tokenizer = load_tokenizer(folder / TOKENIZER_FILE)
    exact = OnnxVerifier(session(folder / model_file), tokenizer)
    fast = OnnxVerifier(session(folder / FAST_FILE), tokenizer, batched=False)
    stray = measure(exact, fast, calibration())
    manifest = {"recipe": RECIPE, "from": exact_digest(folder, model_file), "stray": asdict(stray)}
    (folder / FAST_MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return stray


def main(argv: Sequence[str]) -> int:
    if len(argv) == 2 and argv[0] == "fast":
        print(build_fast(Path(argv[1])))
        return 0
    if len(argv) < 3 or argv[0] != "build":
        print(
            "usage: python -m cache.verifier_model build DIR LABELLED.jsonl... | fast DIR",
            file=sys.stderr,
        )
        return 2
    made = build(Path(argv[1]), [Path(p) for p in argv[2:]])
    print(_MADE if made else "present")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
