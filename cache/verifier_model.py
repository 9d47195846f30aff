"""Where the answer verifier lives ($OVERSPILL_HOME/models), whether the one there is current,
and making it: in a child process (torch never enters a server), at the lowest CPU priority (a
proxy that makes it at its first start keeps serving meanwhile), under a file lock (one maker
per home), into a staging directory renamed into place (a reader sees a whole model or none).

It is made from the labelled pairs in the repository's bench/data (all but their held-out
split): a change in them, or in the edits that make more pairs (cache/verifier_pairs.py), makes
it anew. An install without them uses a verifier made elsewhere, copied into the folder.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from cache.encoders import TOKENIZER_FILE, EmbedderError, log
from cache.onnx_model import discard, exclusive, export_missing, run_child, sweep
from cache.verifier import MODEL_FILE, VERIFIER_DIR
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
    """Make the verifier unless a current one is there; True if this call made one. Blocks
    for minutes: call it off the event loop. The child does it all, lock to rename, so one that
    a stopped proxy started still finishes, for the next start."""
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


def main(argv: Sequence[str]) -> int:
    if len(argv) < 3 or argv[0] != "build":
        print("usage: python -m cache.verifier_model build DIR LABELLED.jsonl...", file=sys.stderr)
        return 2
    made = build(Path(argv[1]), [Path(p) for p in argv[2:]])
    print(_MADE if made else "present")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
