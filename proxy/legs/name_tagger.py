"""The multilingual names tagger: a small head (two layers) over the multilingual encoder's
states (proxy/legs/encoder.py), the encoder's upper layers tuned for it by low-rank adapters;
both trained on labelled sets written elsewhere (proxy/ops/names_training.py says which, and
how), shipped in the package beside their manifest.

The English names model (spaCy, proxy/legs/ner.py) reads English prose well and nothing else;
this reads any of the encoder's hundred languages, forms and records ("Nombre: Ernesto",
"이아현 씨", "漫画家・岡部冬彦"). A piece of text counts as part of a name when the head's
probability that it is one reaches a threshold of the manifest's (chosen on a split of the
training sets, never on a report split): "precise" where a false flag would keep a request
local for nothing, "thorough", lower, where it only puts a placeholder in what leaves.

Blocking: call it in the names model's thread (never on the event loop).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from policies.scripts import unspaced
from proxy.legs.e5_file import Floats
from proxy.legs.encoder import Encoder, gelu

FOLDER = Path(__file__).resolve().parent.parent.parent / "policies" / "names_model"
HEAD_FILE = "head.npz"
ADAPTERS_FILE = "adapters.npz"
MANIFEST_FILE = "manifest.json"
Spans = npt.NDArray[np.int64]  # (pieces, 2): each piece's start and end in its line
# A line is read as one text; a longer line is cut into pieces of this many characters (at a
# space where there is one), as the sets the head learnt from are sentences.
_PIECE_CHARS = 2000
# Lines are read together (one pass of the encoder) up to this many characters, and the
# deadline is checked between passes: about a fifth of a second of the encoder's time.
_BATCH_CHARS = 2000
_WORD_CHARS = 40  # a span grows to its word's ends, by at most this much (a bound on the cost)


@dataclass(frozen=True)
class Manifest:
    # The least probability of a name for a piece to count: "precise" where a false flag keeps
    # a request local, "thorough" where it only puts a placeholder in what leaves.
    precise: float
    thorough: float


@dataclass(frozen=True)
class Head:
    """Standardised states, a GELU layer, one logit: whether a piece belongs to a name."""

    mean: Floats
    scale: Floats
    hidden: Floats
    hidden_bias: Floats
    out: Floats
    out_bias: Floats

    @classmethod
    def load(cls, path: Path) -> Head:
        with np.load(path) as arrays:
            return cls(*(arrays[name].astype(np.float32) for name in cls.__dataclass_fields__))

    def probabilities(self, states: Floats) -> Floats:
        x = (states - self.mean) / self.scale
        h = gelu((x @ self.hidden + self.hidden_bias).astype(np.float32))
        logits = (h @ self.out + self.out_bias).reshape(-1)
        chances: Floats = np.exp(-np.logaddexp(0, -logits))  # the logistic, overflowing nowhere
        return chances


class NameTagger:
    def __init__(self, folder: Path = FOLDER, encoder: Encoder | None = None) -> None:
        manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
        thresholds = manifest["thresholds"]
        self.manifest = Manifest(float(thresholds["precise"]), float(thresholds["thorough"]))
        self._head = Head.load(folder / HEAD_FILE)
        self._encoder = encoder or Encoder(adapters=folder / ADAPTERS_FILE)
        self._read: dict[str, list[tuple[int, Spans, Floats]]] = {}

    def pieces(self, texts: Sequence[str]) -> int:
        """How many pieces of text the encoder would read in `texts` (what reading them costs)."""
        return self._encoder.count(texts)

    def people(
        self, text: str, thorough: bool = False, deadline: float = math.inf
    ) -> list[tuple[int, int]]:
        """The spans of `text` the model takes for people's names (a first name alone too: in
        a record, "Nombre: Jose" is the patient); `thorough`: at the lower threshold (more
        names found, more words taken for names). TimeoutError once `deadline` (monotonic) has
        passed, checked between batches of lines."""
        threshold = self.manifest.thorough if thorough else self.manifest.precise
        found: list[tuple[int, int]] = []
        for start, spans, chances in self._chances(text, deadline):
            found.extend((start + a, start + b) for a, b in runs(spans, chances >= threshold))
        return [widened(text, a, b) for a, b in found]

    def _chances(self, text: str, deadline: float) -> list[tuple[int, Spans, Floats]]:
        """Per line: where it starts, its pieces' spans, and each piece's chance of being in a
        name. Kept until `forget`: a request's texts are judged at both thresholds (the
        English model's names count where this one leans toward a name), read once."""
        if text in self._read:
            return self._read[text]
        out = []
        for batch in batches(pieces(text)):
            if time.monotonic() > deadline:
                raise TimeoutError("the names tagger ran out of time")
            reads = self._encoder.read([text[a:b] for a, b in batch])
            for (start, _), read in zip(batch, reads, strict=True):
                out.append((start, read.spans, self._head.probabilities(read.states)))
        self._read[text] = out
        return out

    def forget(self) -> None:
        """Drops what was read: a request's texts are kept no longer than it is screened (at
        most NAMES_LIMIT_PIECES of them), and the next one's cost is its own."""
        self._read.clear()


def runs(spans: Spans, inside: npt.NDArray[np.bool_]) -> Iterator[tuple[int, int]]:
    """Consecutive pieces inside a name, as one span each."""
    begun: int | None = None
    last = 0
    for (start, end), yes in zip(spans.tolist(), inside.tolist(), strict=True):
        if yes and begun is None:
            begun = start
        if not yes and begun is not None:
            yield begun, last
            begun = None
        last = end
    if begun is not None:
        yield begun, last


def widened(text: str, start: int, end: int) -> tuple[int, int]:
    """A span without the spaces at its edges, grown to whole words where words are spaced (a
    name is never half redacted: "Mü" of "Müller")."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    floor, ceiling = max(0, start - _WORD_CHARS), min(len(text), end + _WORD_CHARS)
    while start > floor and _in_word(text[start - 1]):
        start -= 1
    while end < ceiling and _in_word(text[end]):
        end += 1
    return start, end


def _in_word(char: str) -> bool:
    return char.isalnum() and not unspaced(char)


def batches(cuts: Iterator[tuple[int, int]]) -> Iterator[list[tuple[int, int]]]:
    """Consecutive cuts, together up to _BATCH_CHARS (a longer one alone)."""
    batch: list[tuple[int, int]] = []
    size = 0
    for start, end in cuts:
        if batch and size + end - start > _BATCH_CHARS:
            yield batch
            batch, size = [], 0
        batch.append((start, end))
        size += end - start
    if batch:
        yield batch


def pieces(text: str) -> Iterator[tuple[int, int]]:
    """`text` cut at line breaks, and a long line at a space near every _PIECE_CHARS."""
    start = 0
    while start < len(text):
        line_end = text.find("\n", start)
        line_end = len(text) if line_end < 0 else line_end
        while line_end - start > _PIECE_CHARS:
            cut = text.rfind(" ", start + _PIECE_CHARS // 2, start + _PIECE_CHARS)
            cut = start + _PIECE_CHARS if cut < 0 else cut
            yield start, cut
            start = cut
        if line_end > start:
            yield start, line_end
        start = line_end + 1
