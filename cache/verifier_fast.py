"""The answer verifier's fast reading: an int8 copy of it (cache/verifier.py reads a pair with it
first), and how far below the boundary that reading must fall to refuse a pair alone.

int8 reads a pair in about half fp32's time (5.5 and 10 ms here), but moves a reading: an int8
verifier deciding alone flipped 12 held-out decisions. So it only refuses, and only a pair it
reads further below the boundary than it was measured to read any pair below fp32, with
headroom (`fast_margin`); every pair it cannot refuse goes on to fp32, whose verdict alone
serves. The measurement runs where
the copy is made, on the CPU that serves, over pairs from cache/calibration_pairs.py and the
question templates (never the labelled sets the figures come from).

Made in a child process beside the verifier (cache/verifier_model.py, `make_fast`), with the
quantiser of the export extra; without it the verifier reads fp32 only. The manifest names the
verifier it was made from, so a new verifier makes a new copy.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

FAST_FILE = "verifier-int8.onnx"
FAST_MANIFEST = "fast.json"
# What the copy is made by: a change here makes it anew.
RECIPE = {
    "format": 2,  # 2: the stray is how far int8 reads below fp32, near the boundary and above
    # The embedder's recipe (cache/onnx_model.py): 7-bit weights give the same integers on every
    # x86 CPU, with or without VNNI.
    "quantisation": "dynamic int8, per-channel, 7-bit (reduce_range), MatMul weights only",
    "calibration": "cache.calibration_pairs both orders + 400 template questions, seed 27",
}
# A fast refusal is wrong only for a pair fp32 reads at or above the boundary: what matters is
# how far int8 reads *below* fp32 for pairs fp32 places near the boundary or above it, here from
# 4 logits below it (p 0.018) up. (Both readings run over -7 to 7 logits.)
BAND = 4.0


@dataclass(frozen=True)
class Stray:
    """How far int8 read below fp32, in logits, over the `pairs` readings fp32 placed BAND or
    less below the boundary, or above it: the largest and the 99th percentile (0 for a reading
    int8 placed higher)."""

    max: float
    p99: float
    pairs: int

    def __post_init__(self) -> None:
        if not (0.0 <= self.p99 <= self.max and math.isfinite(self.max) and self.pairs > 0):
            raise ValueError(f"not a measured stray: {self}")


def fast_margin(stray: Stray) -> float:
    """How far below the boundary (logits) a fast reading refuses alone: twice the largest
    stray seen, a maximum over a sample (as the referee's margin is sized: cache/referee.py),
    and at least one logit more; rounded up to hundredths."""
    return math.ceil(round(max(2 * stray.max, stray.max + 1.0) * 100, 6)) / 100


def exact_digest(folder: Path, model_file: str) -> str:
    """Which fp32 verifier a copy was made from: its bytes' digest."""
    digest = hashlib.sha256()
    with (folder / model_file).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_margin(folder: Path) -> float | None:
    """The margin of the fast copy in `folder`, or None when there is no whole one."""
    try:
        written = json.loads((folder / FAST_MANIFEST).read_text())
        stray = Stray(**written["stray"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not (folder / FAST_FILE).is_file():
        return None
    return fast_margin(stray)


def current(folder: Path, model_file: str) -> bool:
    """A whole fast copy, made by this recipe from the verifier now in `folder`."""
    try:
        written = json.loads((folder / FAST_MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    if read_margin(folder) is None or written.get("recipe") != RECIPE:
        return False
    return bool(written.get("from") == exact_digest(folder, model_file))
