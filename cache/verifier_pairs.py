"""The pairs the answer verifier (cache/verifier.py) learns from: labelled question pairs, and as
many again made from their questions by edits whose effect on the answer is known.

An edit that keeps the question (a typo, lower case, a greeting or a "thanks", another opening)
makes a paraphrase; an edit that changes what is asked (one number, one content word swapped for
another from a question of the same domain, a negation, another unit or time) makes a near-miss.
A pair may carry edits of both kinds, so the verifier learns that a typo beside a swapped word is
still a different question. The word families below only make training pairs: the verifier that
learns from them reads the two questions, not these lists. Pure and seeded: the same sources
give the same pairs on every machine.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

PARAPHRASE = 1.0
NEAR_MISS = 0.0


@dataclass(frozen=True)
class Pair:
    first: str
    second: str
    label: float  # PARAPHRASE or NEAR_MISS


Template = tuple[str, tuple[str, ...]]  # a pattern with "{}" slots, each slot's choices "a|b|c"


@dataclass(frozen=True)
class Question:
    text: str
    domain: str


_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")
# Words that carry no content of their own: never the word a near-miss swaps.
_FUNCTION_WORDS = frozenset(
    """a an the and or but if then of to in on at by for with from into about as is are was were be
    been being do does did have has had can could should would will shall may might must my your
    our their his her its it this that these those there here what which who whom whose when
    where why how i you we they he she me us them not no yes so than too very just also any some
    all each every more most less least much many few please thanks thank hi hello hey""".split()
)
# Openings and closings that change nothing about what is asked.
_OPENINGS = (
    *("", "Quick question: ", "Hi, ", "Hello! ", "I was wondering: ", "Please help. "),
    *("Could you tell me: ", "Hey, ", "Can you help? ", "Question: "),
)
_CLOSINGS = ("", " Thanks!", " Thank you.", " Thanks in advance.", " Any help appreciated.")
# Families whose members answer different questions (used only to make near-misses).
_FAMILIES = (
    ("MB", "GB", "KB", "TB"),
    ("kg", "lb", "g", "oz"),
    ("km", "miles", "metres", "feet"),
    ("hours", "minutes", "days", "weeks", "months", "years"),
    ("hour", "minute", "day", "week", "month", "year"),
    ("yesterday", "today", "tomorrow", "last week", "next week", "last year", "next year"),
    ("before", "after", "during"),
    ("cheaper", "cheapest", "more expensive", "most expensive"),
    ("better", "best", "worse", "worst"),
    ("faster", "fastest", "slower", "slowest"),
    ("larger", "largest", "smaller", "smallest"),
    ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"),
    ("January", "March", "June", "September", "December"),
    ("Celsius", "Fahrenheit"),
    ("dollars", "euros", "pounds", "yen"),
)
_NEGATABLE = ("is", "are", "can", "does", "do", "should", "will", "was", "could", "did")


def typo(text: str, rng: random.Random) -> str:
    """One to three letters swapped, dropped or doubled inside words of five letters or more."""
    words = text.split(" ")
    long = [i for i, word in enumerate(words) if len(word) >= 5 and word.isalpha()]
    for i in rng.sample(long, min(len(long), rng.randint(1, 3))):
        word, at = words[i], rng.randrange(1, len(words[i]) - 2)
        edits = (
            word[:at] + word[at + 1] + word[at] + word[at + 2 :],
            word[:at] + word[at + 1 :],
            word[:at] + word[at] + word[at:],
        )
        words[i] = rng.choice(edits)
    return " ".join(words)


def casual(text: str, rng: random.Random) -> str:
    """Lower case, the closing punctuation dropped."""
    return text.lower().rstrip("?.!") if rng.random() < 0.7 else text.rstrip("?.!")


def courteous(text: str, rng: random.Random) -> str:
    """Another opening or closing."""
    stem = text[0].lower() + text[1:] if text[:1].isupper() and text[1:2].islower() else text
    opening = rng.choice(_OPENINGS)
    return (opening + stem if opening else text) + rng.choice(_CLOSINGS)


KEEPING: tuple[Callable[[str, random.Random], str], ...] = (typo, casual, courteous)


def renumbered(text: str, rng: random.Random) -> str | None:
    numbers = list(_NUMBER.finditer(text))
    if not numbers:
        return None
    found = rng.choice(numbers)
    value = float(found.group().replace(",", ""))
    other = rng.choice([value * 10, value + 1, max(value - 1, 0) or 2, value * 2, value / 2])
    shown = f"{other:g}" if other != value else f"{value + 3:g}"
    return text[: found.start()] + shown + text[found.end() :]


def negated(text: str, rng: random.Random) -> str | None:
    """A negation added or removed, where it changes what is asked: after an auxiliary that
    does not open the question ("why is X running" / "why is X not running"; "doesn't it" opens a
    question that asks the same), or in a condition ("if I have eaten" / "if I haven't eaten")."""
    if re.search(r"\bnot\b", text):
        return re.sub(r"\s*\bnot\b", "", text, count=1)
    if re.search(r"n't\b", text):
        return re.sub(r"n't\b", "", text, count=1)
    places = [
        m.end()
        for m in re.finditer(r"\b\w+\b", text)
        if m.start() > 0 and m.group().lower() in _NEGATABLE
    ]
    condition = re.search(r"\b(?:if|when|that) (?:I|you|we|they) ", text)
    if not places and condition is None:
        return None
    if condition is not None and (not places or rng.random() < 0.5):
        return text[: condition.end()] + "don't " + text[condition.end() :]
    at = rng.choice(places)
    return text[:at] + " not" + text[at:]


def family_swapped(text: str, rng: random.Random) -> str | None:
    for family in rng.sample(_FAMILIES, len(_FAMILIES)):
        for member in family:
            found = re.search(rf"\b{re.escape(member)}\b", text)
            if found:
                other = rng.choice([m for m in family if m != member])
                return text[: found.start()] + other + text[found.end() :]
    return None


def content_words(text: str) -> list[str]:
    """Its words of four letters or more that carry content, past the first (which is
    capitalised whatever it is)."""
    words = _WORD.findall(text)[1:]
    return [w for w in words if len(w) > 3 and w.lower() not in _FUNCTION_WORDS]


def word_swapped(text: str, pool: Sequence[str], rng: random.Random) -> str | None:
    """One content word swapped for another of the same domain: a name for a name (a
    capitalised word past the first), a plain word for a plain word."""
    words = [m for m in _WORD.finditer(text) if m.start() > 0 and len(m.group()) > 3]
    words = [m for m in words if m.group().lower() not in _FUNCTION_WORDS]
    if not words:
        return None
    found = rng.choice(words)
    named = found.group()[0].isupper()
    choices = [w for w in pool if w[0].isupper() == named and w.lower() not in text.lower()]
    if not choices:
        return None
    return text[: found.start()] + rng.choice(choices) + text[found.end() :]


def kept(text: str, rng: random.Random) -> str:
    """The same question, edited by one or two of the edits that keep it."""
    for edit in rng.sample(KEEPING, rng.randint(1, 2)):
        text = edit(text, rng)
    return text


def changed(text: str, pool: Sequence[str], rng: random.Random) -> str | None:
    """Another question, one edit away, or None when no edit applies."""
    edits: list[Callable[[], str | None]] = [
        lambda: renumbered(text, rng),
        lambda: negated(text, rng),
        lambda: family_swapped(text, rng),
        lambda: word_swapped(text, pool, rng),
        lambda: word_swapped(text, pool, rng),
    ]
    for edit in rng.sample(edits, len(edits)):
        other = edit()
        if other is not None and other != text:
            return other
    return None


def edited_pairs(questions: Sequence[Question], seed: int = 18) -> list[Pair]:
    """For every question a paraphrase and a near-miss of it (when an edit applies), and a
    near-miss of a paraphrase, so that edits that keep a question never excuse one that
    changes it."""
    rng = random.Random(seed)
    pools: dict[str, list[str]] = {}
    for question in questions:
        pools.setdefault(question.domain, []).extend(content_words(question.text))
    pairs: list[Pair] = []
    for question in questions:
        pool = sorted(set(pools[question.domain]))
        pairs.append(Pair(question.text, kept(question.text, rng), PARAPHRASE))
        other = changed(question.text, pool, rng)
        if other is not None:
            pairs.append(Pair(question.text, other, NEAR_MISS))
            pairs.append(Pair(kept(question.text, rng), kept(other, rng), NEAR_MISS))
    return pairs


def slot_pairs(templates: Sequence[Template], count: int, seed: int = 18) -> list[Pair]:
    """`count` questions from the templates, each with a paraphrase (another opening, maybe a
    typo) and a near-miss (one slot swapped: one plain word or phrase for another of its kind,
    grammatical, which `word_swapped` rarely is: "a quick lasagne recipe" / "a one-pot one")."""
    rng = random.Random(seed)
    pairs: list[Pair] = []
    for _ in range(count):
        pattern, choices = rng.choice(templates)
        slots = [choice.split("|") for choice in choices]
        picked = [rng.choice(options) for options in slots]
        swapped = list(picked)
        slot = rng.randrange(len(slots))
        swapped[slot] = rng.choice([o for o in slots[slot] if o != picked[slot]])
        asked = pattern.format(*picked)
        pairs.append(Pair(courteous(asked, rng), kept(asked, rng), PARAPHRASE))
        other = courteous(pattern.format(*swapped), rng)
        pairs.append(Pair(courteous(asked, rng), other, NEAR_MISS))
    return pairs


def both_orders(pairs: Iterable[Pair]) -> list[Pair]:
    return [p for pair in pairs for p in (pair, Pair(pair.second, pair.first, pair.label))]
