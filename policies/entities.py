"""The detectors that need a language model: people's names, and health information about
someone (pure, given a recogniser of names).

A named-entity model costs milliseconds where a pattern costs microseconds, so these run only
for a request about to leave for a cloud target (proxy/flow/legs.py), never for one served
locally. The recognisers (Presidio with spaCy's English model, and the multilingual names
tagger, proxy/legs/ner.py) are given in, so the rules here are tested without them.

From the English model, a name counts when it is a person's full name, or a surname after a
title: "Helena Brandt", "Mrs. Petrenko" (a single word it takes for a name, "Holmes" or a tool
call's id, is often none), and the multilingual tagger leans toward a name there (its thorough
threshold): alone, the English model takes other languages' capitalised words for names
("Fecha de Ingreso", "Localidad/ Provincia"; on the outside sets' tune rows it flagged 13% of
MEDDOCAN's clean lines). From the multilingual tagger, every span counts: it was trained on
sets whose names include a first name alone in a record ("Nombre: Jose") and names in scripts
written without spaces, and its threshold already weighs how sure it is. Famous people are
names too: neither model can tell Marie Curie from a customer, and a privacy rule errs toward
keeping a request local.
"""

from __future__ import annotations

import re
import string
from bisect import bisect_left
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from policies.medical import names_someone, terms
from policies.payload import Payload
from policies.pii import FINDERS, SCAN_LIMIT_CHARS
from policies.quasi import QUASI_IDENTIFIERS
from policies.re2text import to_bytes

# Detectors whose findings come from a named-entity model: run only on text that leaves.
ENTITY_DETECTORS = ("person", "medical")
# What the screen before leaving decides: those, and quasi-identifiers held for it
SCREENED = (*ENTITY_DETECTORS, *QUASI_IDENTIFIERS)
# Text the entity detectors read for one request, at most (the recogniser's texts, and every
# text when medical terms are looked for); past it, they count as fired (fail closed): a model
# reads about 100,000 characters a second on one core here.
ENTITY_LIMIT_CHARS = 100_000

# These run per span of the model's (the spaces once per text), on fixed literals or a window
# of a few characters: nothing for a backtracking engine to go wrong on, and a call to the re
# module costs a tenth of the RE2 wrapper's on a str (which encodes it, and counts offsets back).
# A title just before a surname (the spaces after it are skipped first, see _Titles).
_TITLE = re.compile(
    r"(?i)(?:^|[^a-z])(mr|mrs|ms|miss|mx|dr|prof|sir|dame|herr|frau|mme|mlle|sr|sra|srta)\.?\Z"
)
# Longer than any title with its full stop and the character before it, so a `^` match in a
# window cut from inside the text is impossible (only the text's own start is one).
_TITLE_WINDOW = 8
_SPACES = re.compile(" +")
# Scripts whose words are not parted by spaces (policies/scripts.py): Han, kana and Hangul;
# Thai, Lao, Myanmar and Khmer
_UNSPACED = re.compile(
    r"[\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7a3\uf900-\ufaff"
    r"\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff]"
)
_NAME_ENDS = re.compile(r"\n| - | – |,|;|\(")


@dataclass(frozen=True)
class Found:
    """What the entity detectors found in a request: per detector, the values (for redaction)
    and the path of the first text it fired on (for reasons, never the value)."""

    values: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    where: Mapping[str, str] = field(default_factory=dict)
    unchecked: Mapping[str, str] = field(default_factory=dict)  # detector -> why not checked

    @property
    def fired(self) -> list[str]:
        return [name for name in SCREENED if name in self.where or name in self.unchecked]

    def reason(self, name: str) -> str:
        if name in self.unchecked:
            return f"{name}: {self.unchecked[name]}"
        return f"detected {name} in {self.where[name]}"


def unchecked(enabled: Collection[str], why: str) -> Found:
    """Every enabled entity detector counted as fired (fail closed), with why."""
    return Found(unchecked={name: why for name in SCREENED if name in enabled})


def read_by_model(payload: Payload) -> list[int]:
    """Which of the payload's texts the recogniser reads: those of more than one word (a name
    is at least two, or a title and one; str.split finds the second word in C), and those
    holding a script written without spaces ("山東昭子" is a full name)."""
    return [
        i
        for i, text in enumerate(payload.texts)
        if len(text.split(None, 1)) > 1 or _UNSPACED.search(text) is not None
    ]


def to_read(payload: Payload, enabled: Collection[str]) -> list[int] | None:
    """The texts the recogniser reads, or None when what the entity detectors would read in
    all runs past ENTITY_LIMIT_CHARS: the recogniser's texts, and every text when medical
    terms are looked for (found() reads each one for them, single words included)."""
    if sum(map(len, payload.texts)) > SCAN_LIMIT_CHARS:
        return None  # past the payload's cap: the texts after it are not in it to be read
    indexes = read_by_model(payload)
    texts = payload.texts if "medical" in enabled else [payload.texts[i] for i in indexes]
    if sum(map(len, texts)) > ENTITY_LIMIT_CHARS:
        return None
    return indexes


def found(
    payload: Payload,
    enabled: Collection[str],
    people: Mapping[int, list[tuple[int, int]]],
    tagged: Mapping[int, list[tuple[int, int]]] | None = None,
    leaning: Mapping[int, list[tuple[int, int]]] | None = None,
) -> Found:
    """The entity detectors' findings, given the recogniser's spans for the texts it read
    (`people`: text index -> spans; English prose, so only full names count), and the
    multilingual tagger's (`tagged`: every span counts, its threshold already erred toward
    a name; `leaning`: at its thorough threshold). A quasi-identifier in `enabled` (held for
    this screen, policies/quasi.py) counts where a name is found or leaned toward."""
    values: dict[str, dict[str, None]] = {}  # a dict per detector: distinct, first seen first
    where: dict[str, str] = {}

    def note(name: str, index: int, value: str) -> None:
        values.setdefault(name, {})[value] = None
        where.setdefault(name, payload.paths[index])

    for index, text_spans in sorted(people.items()):
        for name in full_names(payload.texts[index], text_spans):
            note("person", index, name)
    for index, text_spans in sorted((tagged or {}).items()):
        for start, end in text_spans:
            note("person", index, payload.texts[index][start:end])
    if "medical" in enabled:
        anyone = "person" in values
        for index, text in enumerate(payload.texts):
            if anyone or names_someone(text):
                data = to_bytes(text)
                for start, end in terms(data):
                    note("medical", index, data[start:end].decode("utf-8", "replace"))
    if "person" in values or any((leaning or {}).values()):
        for name in (name for name in QUASI_IDENTIFIERS if name in enabled):
            for index, text in enumerate(payload.texts):
                data = to_bytes(text)
                for start, end in FINDERS[name](data):
                    note(name, index, data[start:end].decode("utf-8", "replace"))
            where.setdefault(name, "the request")  # found by the scan, if not in one text
    if "person" not in enabled:
        values.pop("person", None)
        where.pop("person", None)
    return Found({k: tuple(v) for k, v in values.items()}, where)


def agreed(
    spans: Sequence[tuple[int, int]], leaning: Sequence[tuple[int, int]]
) -> list[tuple[int, int]]:
    """The spans that overlap one of `leaning`'s (the multilingual tagger's, at its thorough
    threshold): both models take the words for a name. n log n in the spans."""
    merged: list[list[int]] = []  # leaning's spans joined where they overlap: ends in order
    for start, end in sorted(leaning):
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    ends = [end for _, end in merged]
    kept = []
    for start, end in spans:
        at = bisect_left(ends, start + 1)  # the first leaning span that ends after `start`
        if at < len(merged) and merged[at][0] < end:
            kept.append((start, end))
    return kept


def model_text(text: str) -> str:
    """`text` as the model reads it: JSON and markup punctuation as spaces, one for one (the
    offsets stay those of `text`). A model trained on prose finds "Sofia Marchetti" in
    `name  :  Sofia Marchetti ,` where it misses it in `"name": "Sofia Marchetti",`."""
    return text.translate(_AS_SPACE)


def full_names(text: str, spans: Sequence[tuple[int, int]]) -> list[str]:
    """The spans that name a person: two or more capitalised name words (a particle such as
    "van" may join them), or one after a title. A span is cut at a line break or a dash, and
    ends at its first word that is no name word ("Lina Haddad - passport" is "Lina Haddad")."""
    names = []
    titled = _Titles(text)
    for start, end in spans:
        words = _name_words(text[start:end])
        capitalised = sum(1 for word in words if word[0].isupper())
        if any(word.isupper() and len(word) > 1 for word in words):
            continue  # "KYC", "XXXX": an acronym or a mask, not a name
        if any(word.lower().rstrip(".") in _COMPANY_WORDS for word in words):
            continue
        if capitalised >= 2 or (capitalised == 1 and titled.before(start)):
            names.append(" ".join(words))
    return names


class _Titles:
    """Whether a title ends just before an offset of `text` ("Mrs. " before "Okonjo"): the
    spaces before it skipped, then a few characters read. Each span costs the same however
    long the text is (searching all the text before each span was quadratic in spans)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._runs: tuple[list[int], list[int]] | None = None  # runs of spaces: starts, ends

    def before(self, start: int) -> bool:
        stop = self._unspaced(start)
        return _TITLE.search(self.text[max(0, stop - _TITLE_WINDOW) : stop]) is not None

    def _unspaced(self, start: int) -> int:
        """Where the spaces that end at `start` begin (`start` when there are none)."""
        if self._runs is None:  # found once per text, when a span first needs them
            runs = [match.span() for match in _SPACES.finditer(self.text)]
            self._runs = [a for a, _ in runs], [b for _, b in runs]
        starts, ends = self._runs
        last = bisect_left(starts, start) - 1  # the last run that begins before `start`
        return starts[last] if last >= 0 and ends[last] >= start else start


def _name_words(span: str) -> list[str]:
    first_line = _NAME_ENDS.split(span.strip(), maxsplit=1)[0]
    words = []
    for word in first_line.split():
        word = word.strip(_PUNCTUATION)
        if not _is_name_word(word):
            break
        words.append(word)
    while words and not words[-1][0].isupper():
        words.pop()  # a trailing particle ("... van") is not part of the name
    return words


def _is_name_word(word: str) -> bool:
    if not word or not word[0].isalpha():
        return False
    if not all(char.isalpha() or char in "'’.-" for char in word):
        return False
    return word[0].isupper() or word in _PARTICLES


_PARTICLES = frozenset(
    {"van", "von", "de", "der", "den", "da", "di", "del", "la", "le", "bin", "al"}
)
_COMPANY_WORDS = frozenset(
    {"gmbh", "ltd", "inc", "llc", "plc", "ag", "sa", "sas", "bv", "nv", "co", "corp", "srl", "spa"}
    | {"oy", "ab", "as", "kg", "limited", "company", "group", "bank", "university", "hotel"}
)
_PUNCTUATION = string.punctuation + "’‘“”«»"
_AS_SPACE = str.maketrans(dict.fromkeys('{}[]"_=|<>*#', " "))
