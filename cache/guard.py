"""A second opinion on a semantic hit: does anything that changes the answer differ between the
cached question and the new one?

Cosine similarity of sentence embeddings does not see the details that matter: "17 times 23" vs
"17 times 24" scored 0.91, "convert 5 km to miles" vs "convert 5 miles to km" 0.99, while true
paraphrases range from 0.43 to 1.0 (bench/semantic.py). So a hit above the threshold is served
only if `conflict(cached, new)` finds none of: other numbers ("five" = 5, "1,000" = 1000, "3.0" =
3), units or quantities, ordinals, negation, opposite or contrasting words (on/off, before/after,
largest/smallest, kitchen/bedroom ...), named entities (capitalised words, identifiers and code,
a table of lowercase names), quoted text, or a reversed conversion ("X to Y" vs "Y to X").

Regex and table look-ups only (the tables are in cache/guard_words.py), so a refusal explains
itself in a log line and costs tens of microseconds. When unsure it refuses: a miss costs one
upstream call, a wrong hit serves a wrong answer.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from cache.guard_features import STRICT_CONTRASTS, Features, features, plain

__all__ = ["DEFAULT_THRESHOLD", "Features", "compare", "conflict", "features"]

# bench/semantic.py on 421 labelled pairs (204 paraphrases, 217 near-misses), both encoders: 0.90
# is the lowest threshold from which on the guard keeps wrong hits under 1% (1 of 217: "Can I
# cancel my order?" vs "... after it has shipped?", cosine 0.92). There precision is 0.99 and
# paraphrase recall 57% (torch) / 56% (onnx); cosine alone would serve 33% of the near-misses.
# 0.85 would serve 74-76% of paraphrases but 3% of near-misses, all of the kind the guard cannot
# see: one lowercase noun for another (password / username, shallow / deep copy).
DEFAULT_THRESHOLD = 0.90


def conflict(cached: str, new: str) -> str | None:
    """None if nothing critical differs, else a short reason for logs and headers."""
    return compare(features(cached), features(new))


def compare(cached: Features, new: Features) -> str | None:
    """conflict() for questions already read by features(): a cache can keep its entries'."""
    for check in _CHECKS:
        reason = check(cached, new)
        if reason is not None:
            return reason
    return None


# --- the checks: (cached, new) -> reason or None ----------------------------------------------


def _check_numbers(a: Features, b: Features) -> str | None:
    if a.numbers == b.numbers:
        return None
    mine, theirs = (
        _extra(a.numbers, b.numbers, b.soft_one),
        _extra(b.numbers, a.numbers, a.soft_one),
    )
    if mine or theirs:
        return _versus("numbers", mine, theirs)
    if Counter(a.numbers) == Counter(b.numbers):
        # "100 divided by 4" vs "4 divided by 100"; "17 times 23" vs "23 times 17" pays for it
        return _versus(
            "number orders", [_show(n) for n in a.numbers], [_show(n) for n in b.numbers]
        )
    return None


def _check_units(a: Features, b: Features) -> str | None:
    if a.units == b.units and a.quantities == b.quantities:
        return None
    if a.units - b.units and b.units - a.units:  # one side silent about a unit is no conflict
        return _versus("units", sorted(a.units - b.units), sorted(b.units - a.units))
    mine = _extra(a.quantities, b.quantities, b.soft_one)
    theirs = _extra(b.quantities, a.quantities, a.soft_one)
    return _versus("quantities", mine, theirs) if mine or theirs else None


def _check_timings(a: Features, b: Features) -> str | None:
    if a.timings and b.timings and a.timings != b.timings:  # "set a 5 minute timer" says none
        return _versus("timings", a.timings, b.timings)
    return None


def _check_ordinals(a: Features, b: Features) -> str | None:
    if a.ordinals == b.ordinals or Counter(a.ordinals) == Counter(b.ordinals):
        return None
    return _versus("ordinals", _ranks(a.ordinals, b.ordinals), _ranks(b.ordinals, a.ordinals))


def _check_negation(a: Features, b: Features) -> str | None:
    if len(a.negations) == len(b.negations):  # "can't" vs "cannot", "never" vs "not"
        return None
    return f"negation differs: {' '.join(a.negations) or '-'} vs {' '.join(b.negations) or '-'}"


def _check_contrasts(a: Features, b: Features) -> str | None:
    if a.contrasts == b.contrasts:
        return _check_prefixed(a, b)
    mine_sets, their_sets = {s for s, _ in a.contrasts}, {s for s, _ in b.contrasts}
    compared = (mine_sets & their_sets) | ((mine_sets | their_sets) & STRICT_CONTRASTS)
    for contrast in sorted(compared):
        mine = sorted(word for s, word in a.contrasts if s == contrast)
        theirs = sorted(word for s, word in b.contrasts if s == contrast)
        if mine != theirs:
            return f"opposite words: {'/'.join(mine) or '-'} vs {'/'.join(theirs) or '-'}"
    return _check_prefixed(a, b)


def _check_prefixed(a: Features, b: Features) -> str | None:
    """lock/unlock, like/dislike, arm/disarm: one word, and its negation by a prefix."""
    mine, theirs = a.mentioned - b.mentioned, b.mentioned - a.mentioned
    for word in mine:
        for prefix in ("un", "dis", "non"):
            if len(word) >= 3 and prefix + word in theirs:
                return f"opposite words: {word} vs {prefix}{word}"
            stem = word[len(prefix) :] if word.startswith(prefix) else ""
            if len(stem) >= 3 and stem in theirs:
                return f"opposite words: {word} vs {stem}"
    return None


def _check_entities(a: Features, b: Features) -> str | None:
    mine = [shown for key, shown in a.entities if not _named(key, b)]
    theirs = [shown for key, shown in b.entities if not _named(key, a)]
    return _versus("entities", mine, theirs) if mine or theirs else None


def _named(key: str, other: Features) -> bool:
    if key in other.mentioned:
        return True
    parts = [part for part in re.split(r"[._]", key) if part]
    return len(parts) > 1 and all(part in other.mentioned for part in parts)


def _check_quoted(a: Features, b: Features) -> str | None:
    if not a.quoted and not b.quoted:
        return None
    plain_a, plain_b = plain(a.text), plain(b.text)  # once, not once per quoted phrase
    mine = [f"'{q}'" for q in a.quoted if not _contains(plain_b, q)]
    theirs = [f"'{q}'" for q in b.quoted if not _contains(plain_a, q)]
    return _versus("quoted texts", mine, theirs) if mine or theirs else None


def _contains(plain_text: str, phrase: str) -> bool:
    """`phrase` as whole words in `plain_text` (found by str.find: no pattern compiled per
    phrase, which cost ~0.1 ms each)."""
    at = plain_text.find(phrase)
    while at >= 0:
        end = at + len(phrase)
        if not _word_char(plain_text, at - 1) and not _word_char(plain_text, end):
            return True
        at = plain_text.find(phrase, at + 1)
    return False


def _word_char(text: str, at: int) -> bool:
    return 0 <= at < len(text) and (text[at].isalnum() or text[at] == "_")


def _check_arrows(a: Features, b: Features) -> str | None:
    for left, connector, right in a.arrows:
        reversed_ = (right, connector, left)
        if left != right and reversed_ in b.arrows and (left, connector, right) not in b.arrows:
            return f"direction reversed: {left} {connector} {right} vs {right} {connector} {left}"
    return None


_CHECKS: tuple[Callable[[Features, Features], str | None], ...] = (
    _check_numbers,
    _check_units,
    _check_timings,
    _check_ordinals,
    _check_negation,
    _check_contrasts,
    _check_entities,
    _check_quoted,
    _check_arrows,
)


# --- helpers for the reasons ------------------------------------------------------------------


def _extra(mine: Iterable[object], theirs: Iterable[object], forgive_one: bool) -> list[str]:
    """What `mine` has beyond `theirs`; an unstated 1 is forgiven if the other side said "a"."""
    surplus = Counter(mine) - Counter(theirs)
    shown = [_show(item) for item in surplus.elements() if not (forgive_one and _is_one(item))]
    return sorted(shown)


def _is_one(item: object) -> bool:
    return item == 1.0 or (isinstance(item, tuple) and item[0] == 1.0)


def _show(item: object) -> str:
    if isinstance(item, tuple):
        return " ".join(_show(part) for part in item)
    return f"{item:g}" if isinstance(item, float) else str(item)


def _ranks(mine: Sequence[int], theirs: Sequence[int]) -> list[str]:
    return [f"#{rank}" for rank in sorted((Counter(mine) - Counter(theirs)).elements())]


def _versus(what: str, mine: Sequence[str], theirs: Sequence[str]) -> str:
    return f"{what} differ: {', '.join(mine) or '-'} vs {', '.join(theirs) or '-'}"
