"""The multilingual names tagger: a linear-chain CRF (CRFsuite) over the tokens and features of
policies/name_features.py, trained on labelled sets written elsewhere (proxy/ops/names_training.py
says which, and how), shipped in the package beside its manifest and gazetteer.

The English names model (spaCy, proxy/legs/ner.py) reads English prose well and nothing else;
this reads any script, forms and records ("Nombre: Ernesto", "이아현 씨", "漫画家・岡部冬彦"),
at about 13 µs a token. A token counts as part of a name when the model's marginal probability
that it is one reaches a threshold of the manifest's (chosen on a split of the training sets,
never on a report split): "precise" where a false flag would keep a request local for nothing,
"thorough", lower, where it only puts a placeholder in what leaves redacted.

Blocking: call it in the names model's thread (never on the event loop).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from policies.name_features import Gazetteer, features, tokens

FOLDER = Path(__file__).resolve().parent.parent.parent / "policies" / "names_model"
MODEL_FILE = "names.crfsuite"
GAZETTEER_FILE = "gazetteer.json.gz"
MANIFEST_FILE = "manifest.json"
NAME = "P"  # the label of a token inside a name
# A line is tagged as one sequence; a longer line is cut into pieces of this many characters
# (at a space where there is one), so no sequence grows past what the model was trained on.
_PIECE_CHARS = 2000


@dataclass(frozen=True)
class Manifest:
    # The least marginal probability of NAME for a token to count: "precise" where a false
    # flag keeps a request local, "thorough" where it only puts a placeholder in what leaves.
    precise: float
    thorough: float


def load_gazetteer(folder: Path = FOLDER) -> Gazetteer:
    with gzip.open(folder / GAZETTEER_FILE, "rt", encoding="utf-8") as stream:
        lists = json.load(stream)
    return Gazetteer(
        *(frozenset(lists[field]) for field in ("given", "family", "places", "companies"))
    )


class NameTagger:
    def __init__(self, folder: Path = FOLDER) -> None:
        import pycrfsuite

        manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
        thresholds = manifest["thresholds"]
        self.manifest = Manifest(float(thresholds["precise"]), float(thresholds["thorough"]))
        self._names = load_gazetteer(folder)
        self._tagger: Any = pycrfsuite.Tagger()
        self._tagger.open(str(folder / MODEL_FILE))

    def people(self, text: str, thorough: bool = False) -> list[tuple[int, int]]:
        """The spans of `text` the model takes for people's names (a first name alone too: in
        a record, "Nombre: Jose" is the patient); `thorough`: at the lower threshold (more
        names found, more words taken for names)."""
        threshold = self.manifest.thorough if thorough else self.manifest.precise
        found: list[tuple[int, int]] = []
        for start, end in pieces(text):
            found.extend(self._tagged(text, start, end, threshold))
        return found

    def _tagged(self, text: str, start: int, end: int, threshold: float) -> list[tuple[int, int]]:
        piece = text[start:end]
        spans = tokens(piece)
        if not spans:
            return []
        self._tagger.set(features(piece, spans, self._names))
        inside = [self._tagger.marginal(NAME, i) >= threshold for i in range(len(spans))]
        return [(start + a, start + b) for a, b in runs(spans, inside)]


def runs(spans: list[tuple[int, int]], inside: list[bool]) -> Iterator[tuple[int, int]]:
    """Consecutive tokens inside a name, as one span each."""
    begun: int | None = None
    last = 0
    for (start, end), yes in zip(spans, inside, strict=True):
        if yes and begun is None:
            begun = start
        if not yes and begun is not None:
            yield begun, last
            begun = None
        last = end
    if begun is not None:
        yield begun, last


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
