"""Typos mended before a question is embedded: "how do i chnage my profle picture" lands next to
"How do I change my profile picture?" (cosine 0.63 as typed, under the 0.70 at which the cache
looks at a candidate at all; typos were most of the paraphrases it missed, README "Typos").

A word is mended only when nobody knows it: neither the encoder's vocabulary (the whole words of
its WordPiece vocabulary, ~21,700) nor the questions already stored in the same context. It
becomes the word one edit away (a letter dropped, added, changed, or two swapped) that the
stored questions use most: "pian" is "pain" beside a question about chest pain, and stays "pian"
where none is near. Never a word of the vocabulary alone: that one lacks common words
("relieves", "blender", "delete"), which it would bend into others ("believes", "slender",
"deleted": a first version lost 3 paraphrases of the held-out half and 3 of the fresh set so).
Short words are left alone: "hom" is one edit from how, him, hot and home.

Every client byte is hostile, and a word's neighbours one edit away number about 54 per letter,
each as long as the word: so only words of at most `LONGEST` letters are mended, and at most
`MENDED_AT_MOST` of them per text (a question typed in a hurry has a few typos, not dozens).
Past that budget `spelled` leaves the rest as typed (the vector only loses recall) and
`corrected` gives up (None): its reading is a check, and a check that cannot read a pair whole
refuses it. Either costs under a millisecond a text (0.7 ms measured on a busy machine with four
unknown 16-letter words), whatever the text.

Only the vector is mended: the guard and the answer verifier read the questions as they were
asked, and once more with their typos corrected (`corrected`), and a hit needs both readings:
a word mended into another one can bring a candidate to them, never serve it.
"""

from __future__ import annotations

import re
import string
import sys
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

WORD = re.compile(r"[^\W\d_]+")  # letters only: "2024-03-01" and "gpt-4o" have none to mend
SHORTEST = 4  # shorter words have too many neighbours one edit away to pick from
LONGEST = 16  # longer ones are left as typed: their neighbours cost ~0.11 ms to list at 16
MENDED_AT_MOST = 4  # unknown words looked up per text (each costs up to ~0.11 ms)
LETTERS = string.ascii_lowercase


@dataclass(frozen=True)
class Lexicon:
    """The encoder's whole words, the words that are no typo, each with its rank (0: the
    commonest; a WordPiece vocabulary lists them by frequency)."""

    ranks: Mapping[str, int]


def lexicon_of(tokens: Iterable[str]) -> Lexicon:
    """From a WordPiece vocabulary in id order: its plain lowercase words (not the "##"
    pieces, the "[unused]" slots or punctuation), ranked as listed."""
    ranks: dict[str, int] = {}
    for token in tokens:
        if token.isascii() and token.isalpha() and token.islower():
            ranks.setdefault(token, len(ranks))
    return Lexicon(ranks)


def read_lexicon(vocabulary: Path) -> Lexicon:
    """`vocabulary`: a vocab.txt, one token a line in id order."""
    return lexicon_of(vocabulary.read_text(encoding="utf-8").split("\n"))


def words_of(text: str) -> list[str]:
    """The words a context's vocabulary counts: lowercase, long enough to be mended toward."""
    return [word for word in WORD.findall(text.lower()) if len(word) >= SHORTEST]


def spelled(text: str, lexicon: Lexicon, nearby: Mapping[str, int]) -> str:
    """`text` with every word neither `lexicon` nor `nearby` (the stored questions' words, with
    how many use each) knows replaced by a stored word one edit away, when there is one: the
    first `MENDED_AT_MOST` such words, the rest left as typed."""
    if not nearby or not text.isascii():  # another language: its words are not typos of ours
        return text
    budget = _Budget()

    def mend(match: re.Match[str]) -> str:
        word = match.group()
        lower = word.lower()
        if lower in lexicon.ranks or lower in nearby or not budget.spend(lower):
            return word
        return mended(word, lexicon, nearby)

    return WORD.sub(mend, text)


def mended(word: str, lexicon: Lexicon, nearby: Mapping[str, int]) -> str:
    lower = word.lower()
    if not nearby or not _mendable(lower) or lower in lexicon.ranks or lower in nearby:
        return word
    stored = [known for known in one_edit(lower) if known in nearby]
    # the most used, then alphabetical: the same answer every time (a word dropped from
    # `nearby` meanwhile counts as unused)
    return min(stored, key=lambda known: (-nearby.get(known, 0), known)) if stored else word


def corrected(text: str, other: str, lexicon: Lexicon) -> str | None:
    """`text` as the guard reads it a second time, so that a typo does not hide a difference
    from it ("what dishes can i make witout an oven" is "without"): each unknown word mended
    toward `other`'s words, else the vocabulary's commonest word one edit away. That last step
    bends rare words ("httpx" into "http"), so its reading only ever adds a refusal. None when
    `text` has more unknown words than the budget reads: it cannot be read whole."""
    if not text.isascii():
        return text
    nearby = set(words_of(other))
    budget = _Budget()

    def correct(match: re.Match[str]) -> str:
        word = match.group()
        lower = word.lower()
        if len(lower) < SHORTEST or lower in lexicon.ranks or lower in nearby:
            return word
        if not budget.spend(lower):
            return word
        edits = one_edit(lower)
        stored = sorted(known for known in edits if known in nearby)
        common = sorted((k for k in edits if k in lexicon.ranks), key=lexicon.ranks.__getitem__)
        return (stored or common or [word])[0]

    mended_text = WORD.sub(correct, text)
    return None if budget.exceeded else mended_text


def _mendable(lower: str) -> bool:
    return SHORTEST <= len(lower) <= LONGEST


@dataclass
class _Budget:
    """The unknown words one text may have looked up: `spend` says whether this one may be."""

    left: int = MENDED_AT_MOST
    exceeded: bool = False  # an unknown word went unread: over budget, or too long

    def spend(self, lower: str) -> bool:
        if len(lower) < SHORTEST:
            return False
        if len(lower) > LONGEST or self.left == 0:
            self.exceeded = True
            return False
        self.left -= 1
        return True


def one_edit(word: str) -> set[str]:
    """Every string one deletion, transposition, substitution or insertion from `word`."""
    splits = [(word[:cut], word[cut:]) for cut in range(len(word) + 1)]
    return {
        *(left + right[1:] for left, right in splits if right),
        *(left + right[1] + right[0] + right[2:] for left, right in splits if len(right) > 1),
        *(left + letter + right[1:] for left, right in splits if right for letter in LETTERS),
        *(left + letter + right for left, right in splits for letter in LETTERS),
    } - {word}


@dataclass
class ContextWords:
    """The words of the questions stored in each context, with how many use each: what a
    question asked in that context is mended toward. A stored question counts as mended, so a
    typo stored once is not taken for a known word the next time it is asked."""

    lexicon: Lexicon
    _counts: dict[str, Counter[str]] = field(default_factory=dict)
    _kept: dict[int, tuple[str, tuple[str, ...]]] = field(default_factory=dict)  # by entry

    def spelled(self, context: str, text: str) -> str:
        return spelled(text, self.lexicon, self._counts.get(context, {}))

    def add(self, ident: int, context: str, question: str) -> None:
        self.drop(ident)
        # Mended here, not taken from the lookup: the context's words may have changed while the
        # answer was made, and a restored entry had no lookup (~0.1 ms, with unknown words only).
        # Interned: 100,000 questions share a few thousand words, not hold copies of them
        words = tuple(sys.intern(word) for word in set(words_of(self.spelled(context, question))))
        self._counts.setdefault(context, Counter()).update(words)
        self._kept[ident] = (context, words)

    def drop(self, ident: int) -> None:
        kept = self._kept.pop(ident, None)
        if kept is None:
            return
        context, words = kept
        counts = self._counts[context]
        counts.subtract(words)
        for word in words:
            if counts[word] <= 0:
                del counts[word]
        if not counts:
            del self._counts[context]

    def known(self, context: str) -> Mapping[str, int]:
        """The context's words and their counts (a view, for tests and status)."""
        return self._counts.get(context, {})
