"""What the multilingual names tagger reads of a text: its tokens, and per token the features a
linear-chain CRF weighs (pure).

Any script: a run of letters is a token, and so is each character of the scripts written
without spaces between words (Han, kana, Hangul syllables), so "岡部冬彦が" and "김원준 씨가"
are read a character at a time. What a token is weighs with what it looks like (case, shape,
script, its ends) and with what stands beside it (the words around it: a title, "Nombre:", a
verb of saying; whether those look like names too), and with whether it is a known given name
or surname in any of faker's 86 locales (a gazetteer from a well-kept generator, not lists of
our own). The gazetteer is given in (proxy/legs/name_tagger.py loads it beside the model).

Linear in the text: one regular-expression pass (a letter run cannot backtrack), then a fixed
number of features per token.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# Letters (with inner apostrophes and hyphens: O'Neill, Jean-Luc), digits, or one other mark.
_TOKEN = re.compile(r"[^\W\d_]+(?:['’\-][^\W\d_]+)*|\d+|[^\s]")
_WINDOW = 2
_NGRAM = 3  # the longest run of single-character tokens looked up as a name


@dataclass(frozen=True)
class Gazetteer:
    """Given names and surnames of many locales, as written there (any script); and the
    names of places and the words of company names, which look like people's names and are
    not ("Washington", "Siemens")."""

    given: frozenset[str]
    family: frozenset[str]
    places: frozenset[str] = frozenset()
    companies: frozenset[str] = frozenset()


def unspaced(char: str) -> bool:
    """A character of a script that writes words without spaces: each one is a token."""
    code = ord(char)
    return (
        0x3040 <= code <= 0x30FF  # hiragana, katakana
        or 0x3400 <= code <= 0x4DBF
        or 0x4E00 <= code <= 0x9FFF  # Han
        or 0xF900 <= code <= 0xFAFF
        or 0xAC00 <= code <= 0xD7A3  # Hangul syllables
        or 0x20000 <= code <= 0x2FA1F
        or 0x31F0 <= code <= 0x31FF
    )


def tokens(text: str) -> list[tuple[int, int]]:
    """The tokens of `text`, as (start, end) offsets."""
    out: list[tuple[int, int]] = []
    for match in _TOKEN.finditer(text):
        start, end = match.span()
        if end - start > 1 and any(unspaced(c) for c in text[start:end]):
            out.extend(_split_unspaced(text, start, end))
        else:
            out.append((start, end))
    return out


def _split_unspaced(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """A letter run holding unspaced characters: each of them alone, runs of others whole."""
    out: list[tuple[int, int]] = []
    begun = start
    for at in range(start, end):
        if unspaced(text[at]):
            if begun < at:
                out.append((begun, at))
            out.append((at, at + 1))
            begun = at + 1
    if begun < end:
        out.append((begun, end))
    return out


def shape(word: str) -> str:
    """Upper, lower, digit and unspaced characters, runs of one kind shown once: "Xx", "d"."""
    kinds: list[str] = []
    for char in word:
        kind = (
            "C"
            if unspaced(char)
            else "X"
            if char.isupper()
            else "x"
            if char.isalpha()
            else "d"
            if char.isdigit()
            else char
        )
        if not kinds or kinds[-1] != kind:
            kinds.append(kind)
    return "".join(kinds)[:6]


def script_of(char: str) -> str:
    code = ord(char)
    if code < 0x250:
        return "latin"
    if 0x370 <= code < 0x400:
        return "greek"
    if 0x400 <= code < 0x530:
        return "cyrillic"
    if 0x590 <= code < 0x700:
        return "rtl"
    if 0xAC00 <= code <= 0xD7A3:
        return "hangul"
    if 0x3040 <= code <= 0x30FF:
        return "kana"
    return "han" if unspaced(char) else "other"


def features(text: str, spans: Sequence[tuple[int, int]], names: Gazetteer) -> list[list[str]]:
    """Per token, the features the tagger weighs."""
    words = [text[start:end] for start, end in spans]
    own = [_own(word, names) for word in words]
    known = _known_runs(words, names)
    out = []
    for i, word in enumerate(words):
        item = [*own[i], *known[i]]
        for offset in range(-_WINDOW, _WINDOW + 1):
            j = i + offset
            if offset == 0:
                continue
            if 0 <= j < len(words):
                item.append(f"{offset}w={words[j].lower()}")
                item.extend(f"{offset}{f}" for f in own[j] if f[0] in "sgf")
            else:
                item.append(f"{offset}edge")
        if i > 0 and spans[i - 1][1] == spans[i][0]:
            item.append("joined")  # no space before: inside a word of an unspaced script
            if _one_unspaced(word):
                item.append(f"b-={words[i - 1]}{word}")
        if i + 1 < len(words) and _one_unspaced(word) and spans[i][1] == spans[i + 1][0]:
            item.append(f"b+={word}{words[i + 1]}")
        out.append(item)
    return out


def _one_unspaced(word: str) -> bool:
    return len(word) == 1 and unspaced(word)


def _own(word: str, names: Gazetteer) -> list[str]:
    lower = word.lower()
    feats = [f"w={lower}", f"sh={shape(word)}", f"sc={script_of(word[0])}"]
    if len(word) > 2:
        feats += [f"p3={lower[:3]}", f"s3={lower[-3:]}", f"s2={lower[-2:]}"]
    if len(word) > 12:
        feats.append("long")
    if word in names.given or word.title() in names.given:
        feats.append("g")
    if word in names.family or word.title() in names.family:
        feats.append("f")
    if word in names.places or word.title() in names.places:
        feats.append("sp")  # "s": neighbours see it too
    if word in names.companies or word.title() in names.companies:
        feats.append("so")
    return feats


def _known_runs(words: Sequence[str], names: Gazetteer) -> list[list[str]]:
    """Runs of single unspaced characters that spell a known name ("佐藤", "冬彦"): each
    character of the run marked, with where in the run it sits."""
    marks: list[list[str]] = [[] for _ in words]
    for i in range(len(words)):
        if not _one_unspaced(words[i]):
            continue
        run = words[i]
        if run in names.family:
            marks[i].append("kf1")  # a one-character surname: 김, 王
        for j in range(i + 1, min(len(words), i + _NGRAM)):
            if not _one_unspaced(words[j]):
                break
            run += words[j]
            kinds = (("kg", names.given), ("kf", names.family), ("kp", names.places))
            for kind, known in kinds:
                if run in known:
                    for at in range(i, j + 1):
                        marks[at].append(f"{kind}{'B' if at == i else 'I'}")
    return marks
