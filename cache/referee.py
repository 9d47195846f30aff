"""The referee of borderline similarities: the reference model settles a similarity that the
fast one (int8) places too close to the threshold to trust, so that the cache serves exactly the
hits the reference would (cache/judge.py asks; this module says when and how far).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from cache.index import Vector

# The margin of a fast model nothing was measured of yet: cosines and thresholds lie within
# [-1, 1], so a band this wide hands every similarity to the referee. (The cache places none
# before the fast model is loaded, and what was measured of it is read with it.)
UNMEASURED_MARGIN = 2.0


class Embeds(Protocol):
    @property
    def ready(self) -> bool:
        """The model is loaded: a lookup would not wait seconds for it."""
        ...

    def warm(self) -> None:
        """Start loading the model, if not yet done."""
        ...

    async def embed(self, text: str) -> Vector: ...


@dataclass(frozen=True)
class Referee:
    """The reference model, for the similarities the fast one places within `margin()` of the
    threshold: on which side of it they fall is the reference's call. The margin is read when a
    similarity is placed, not when the cache is built: it is measured on the fast model, and
    that loads on demand."""

    embeds: Embeds
    margin: Callable[[], float]
    # How far below the threshold it still looks (None: as far as `margin`). Below, it can only
    # find hits the fast model missed, which cost an upstream call each, not a wrong answer.
    below: Callable[[], float] | None = None


def referee_margin(shift: float) -> float:
    """The margin for a fast model that moved a similarity by at most `shift` on the
    calibration pairs (cache.onnx_model), rounded up to thousandths."""
    # Twice the shift, because it is a maximum over a sample and the tail is a few texts whose
    # int8 vector strays far: where it was chosen, the largest shift among the 203,149 pairs of
    # 727 texts the calibration never saw was 1.97 times the calibration's (0.0714 vs 0.0362),
    # on bench.semantic's 421 labelled pairs 1.71 times; 1.5 times covered neither. At least
    # 0.01 more, for a model that barely moves anything there.
    # (rounded to a millionth first, so that 0.013000000000000001 is 0.013, not 0.014)
    return math.ceil(round(max(2 * shift, shift + 0.01) * 1000, 6)) / 1000


def referee_band_below(shift: float) -> float:
    """How far below the threshold the referee still looks, for a fast model that moved a
    similarity by at most `shift` on the calibration pairs: the shift itself, rounded up. Above
    the threshold `referee_margin`'s headroom keeps out a wrong hit; below, the referee can only
    find a hit the fast model missed, and the rare pair it moved further is a miss (one upstream
    call). On bench.semantic's 1,121 labelled pairs this half band served every paraphrase the
    full one did, and on distinct questions (bench.cache_miss) most lookups it settled lay there."""
    return math.ceil(round(shift * 1000, 6)) / 1000


def settled(
    similarity: float, threshold: float, margin: float, below: float | None = None
) -> bool | None:
    """Similar enough, by a fast similarity within `margin` of the reference one (`below` the
    threshold, when given); None when only the reference can tell."""
    if similarity >= threshold + margin:
        return True
    if similarity < threshold - (margin if below is None else below):
        return False
    return None
