"""Reading one question for cache/guard.py: the numbers, units, names, negations and contrast
words it contains, as a Features tuple. Pure and table-driven (tables in cache/guard_words.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from cache.guard_words import (
    ALIASES,
    ALONE,
    CONTRASTS,
    ENTITIES,
    LETTER_NAMES,
    NEGATIONS,
    NOT_NAMES,
    NUMBERS,
    ORDINALS,
    SCALES,
    SKIPPED,
    SOFT_ONE,
    SYMBOL_PATTERN,
    SYMBOLS,
    TIMINGS,
    UNITS,
    WORDS,
)


class Features(NamedTuple):  # a NamedTuple rather than a frozen dataclass: 4x cheaper to make
    """What a question says that an answer depends on; compared pairwise by the checks."""

    numbers: tuple[float, ...]  # in order of appearance
    soft_one: bool  # "a", "one", "per": an unstated 1 on the other side is no difference
    quantities: tuple[tuple[float, str], ...]  # (5.0, "mile")
    timings: tuple[str, ...]  # "in" 5 minutes, "for" 5 minutes
    units: frozenset[str]
    ordinals: tuple[int, ...]
    negations: tuple[str, ...]
    contrasts: frozenset[tuple[int, str]]  # (contrast set, member)
    entities: tuple[tuple[str, str], ...]  # (key, as written)
    mentioned: frozenset[str]  # every word: is the other side's entity named here?
    quoted: tuple[str, ...]
    text: str  # after the rewrites: where the other side's quoted text is looked for
    arrows: frozenset[tuple[str, str, str]]  # "X to Y", "X after Y": (x, "to", y)


# --- the lexicon: every table word -> what it means here, built once -------------------------


@dataclass(frozen=True, slots=True)
class _Word:
    number: float | None = None
    alone: bool = False  # "twice", "squared": a number, never part of "twenty-one"
    scale: float | None = None
    ordinal: int | None = None
    unit: str | None = None
    unit_after_number: bool = False  # "m", "min", "am": a unit only right after a number
    negation: bool = False
    soft_one: bool = False
    entity: str | None = None
    contrasts: tuple[tuple[int, str], ...] = ()


def _inflections(word: str) -> set[str]:
    """Regular verb and plural forms; a few that are no words ("hoted") cost nothing."""
    forms = {word, word + "s", word + "es", word + "ed", word + "d", word + "ing"}
    if word.endswith("e"):
        forms.add(word[:-1] + "ing")
    if word.endswith("y"):
        forms |= {word[:-1] + "ies", word[:-1] + "ied"}
    if len(word) <= 4 and word[-1] not in "aeiouwy":
        forms |= {word + word[-1] + "ed", word + word[-1] + "ing"}
    return forms


def _lexicon() -> dict[str, _Word]:
    words: dict[str, _Word] = {}

    def add(forms: Iterable[str], **fields: object) -> None:
        for form in forms:
            old = words.get(form, _Word())
            extra = fields.get("contrasts")
            if isinstance(extra, tuple):  # a word may sit in several contrast sets
                fields = {**fields, "contrasts": old.contrasts + extra}
            words[form] = replace(old, **fields)  # type: ignore[arg-type]

    for word, value in NUMBERS.items():
        add([word], number=float(value))
    for word, value in ALONE.items():
        add([word], number=float(value), alone=True)
    for word, value in SCALES.items():
        add([word], scale=float(value))
    for word, rank in ORDINALS.items():
        add([word], ordinal=rank)
    for line in UNITS:
        canonical, _, forms = line.partition(":")
        for form in forms.split():
            short = form.startswith("~")
            spelled = {form[1:]} if short else {form, form + "s", form + "es"}
            add(spelled, unit=canonical, unit_after_number=short)
    add(NEGATIONS.split(), negation=True)
    add(SOFT_ONE.split(), soft_one=True)
    for name in " ".join(ENTITIES).split():
        add({name, name + "s"}, entity=name)
    for index, line in enumerate(CONTRASTS):
        for member in line.lstrip("!").split("|"):
            canonical, *_ = synonyms = member.split()
            for form in synonyms:
                add(_inflections(form), contrasts=((index, canonical),))
    return words


_LEXICON = _lexicon()
_EMPTY = _Word()
_NEGATED = _Word(negation=True)  # any "...n't"
STRICT_CONTRASTS = frozenset(i for i, line in enumerate(CONTRASTS) if line.startswith("!"))

_SYMBOLS = re.compile(SYMBOL_PATTERN)
_SYMBOL_HINT = re.compile(r"[°%×*÷/^+−]|\d\s*[x-]")
_WORDS = re.compile(
    r"\b(?:" + "|".join(f"(?P<{name}>{pattern})" for name, pattern, _ in WORDS) + ")"
)
_WORD_HINT = re.compile(r"(?i:km|kph|mile|met|per|[/#+])|U\.|US|UK|WW|Mt\.")
_HINT = re.compile(f"{_SYMBOL_HINT.pattern}|{_WORD_HINT.pattern}")
_WORD_REPLACEMENTS = {name: replacement for name, _, replacement in WORDS}
_TOKEN = re.compile(  # findall() tuples: (word, "(", ordinal, number, currency, stop, backtick)
    r"([^\W\d]\w*(?:[.'’][^\W\d]\w*)*(?:-\w+)*['’]?)(\(?)"
    r"|(\d+(?:st|nd|rd|th)\b)"
    r"|(\d{1,3}(?:,\d{3})+(?!\d)(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
    r"|([$€£])"
    r"|([.!?:;\n])"
    r"|(`)"
)
# A curly quote's text stops at the next opening mark too: an unclosed "“" would otherwise be
# scanned to the end of the text, for each one (quadratic in a text of opening marks).
_QUOTED = re.compile(r"`([^`]+)`|\"([^\"]+)\"|“([^“”]+)”|‘([^‘’]+)’|(?<!\w)'([^']+)'(?!\w)")
_QUOTE_MARKS = frozenset("`\"“‘'")
_IDENTIFIER = re.compile(r"[a-z][A-Z]")  # camelCase; snake_case and dotted.names by "_" and "."
_ABBREVIATIONS = frozenset({"mr", "mrs", "ms", "dr", "st", "jr", "sr", "vs", "etc", "e.g", "i.e"})
_CURRENCIES = {"$": "usd", "€": "eur", "£": "gbp"}
_TEMPERATURES = frozenset({"celsius", "fahrenheit", "kelvin"})
_DURATIONS = frozenset("second minute hour day week fortnight month year decade century".split())
_CONNECTORS = {"to": "to", "into": "to", "after": "after", "before": "before"}


# --- text -> tokens ---------------------------------------------------------------------------


class _Token(NamedTuple):  # a plain tuple: a few dozen are made per question
    kind: str  # "num", "ord", "word", "cur"
    text: str  # as written
    key: str  # lowercase, possessive dropped, alias resolved
    whole: str  # a hyphenated word joined ("wi-fi" -> "wifi"); else key
    initial: bool  # starts a sentence: a capital says nothing
    code: bool  # in backticks or followed by "(": an identifier
    value: float
    info: _Word


def _rewritten(text: str) -> str:
    if not _HINT.search(text):  # most questions: one quick scan
        return text
    if _SYMBOL_HINT.search(text):
        text = _SYMBOLS.sub(_symbol, text)
    if _WORD_HINT.search(text):
        text = _WORDS.sub(lambda m: _WORD_REPLACEMENTS[m.lastgroup or ""], text)
    return text


def _symbol(match: re.Match[str]) -> str:
    symbol = "".join(match.group().split()).lower()
    return SYMBOLS.get(symbol, SYMBOLS.get(symbol[:1], symbol))


def _tokens(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    initial, code = True, False
    for word, call, ordinal, number, currency, stop, tick in _TOKEN.findall(text):
        if word and word.isalpha():  # most tokens: the short way
            key = ALIASES.get(word.lower(), word.lower())
            tokens.append(
                _Token("word", word, key, key, initial, code or bool(call), 0.0, _word(key))
            )
        elif word:
            tokens.extend(_words(word, initial, code or bool(call)))
        elif ordinal or number:
            value = float(ordinal[:-2] if ordinal else number.replace(",", ""))
            kind, raw = ("ord", ordinal) if ordinal else ("num", number)
            tokens.append(_Token(kind, raw, f"{value:g}", raw, initial, code, value, _EMPTY))
        elif currency:
            key = _CURRENCIES[currency]
            tokens.append(_Token("cur", currency, key, key, initial, code, 0.0, _EMPTY))
        else:
            code = code != bool(tick)
            after_abbreviation = stop == "." and tokens and tokens[-1].key in _ABBREVIATIONS
            initial = initial or (bool(stop) and not after_abbreviation)
            continue
        initial = False
    return tokens


def _words(raw: str, initial: bool, code: bool) -> list[_Token]:
    """One token per hyphenated part ("ninety-seven" counts as numbers), each knowing the whole."""
    plain = raw.replace("’", "'")
    plain = plain[:-2] if plain.endswith("'s") else plain.rstrip("'")
    parts = [part for part in plain.split("-") if part]
    whole = _key("".join(parts))
    keys = [_key(part) for part in parts]
    return [
        _Token("word", part, key, whole, initial and n == 0, code, 0.0, _word(key))
        for n, (part, key) in enumerate(zip(parts, keys, strict=True))
    ]


def _key(word: str) -> str:
    lower = word.lower()
    return ALIASES.get(lower, lower)


def _word(key: str) -> _Word:
    found = _LEXICON.get(key)
    if found is not None:
        return found
    return _NEGATED if key.endswith("n't") else _EMPTY


# --- tokens -> features -----------------------------------------------------------------------


def features(text: str) -> Features:
    """Everything conflict() compares, for one question; pure, so callers may keep it."""
    rewritten = _rewritten(text)
    tokens = _tokens(rewritten)
    numbers, soft_one = _numbers(tokens)
    quoted = tuple(_quoted(rewritten)) if not _QUOTE_MARKS.isdisjoint(rewritten) else ()
    mentioned = frozenset(_mentioned(tokens))
    return Features(
        numbers=tuple(value for _, _, value in numbers),
        soft_one=soft_one,
        quantities=tuple(_quantities(tokens, numbers)),
        timings=tuple(sorted(_timings(tokens, numbers))),
        units=frozenset(_units(tokens)),
        ordinals=tuple(_ordinals(tokens)),
        negations=tuple(t.key for t in tokens if t.info.negation),
        contrasts=frozenset(c for t in tokens for c in t.info.contrasts),
        entities=_entities(tokens),
        mentioned=mentioned,
        quoted=quoted,
        text=rewritten,
        arrows=frozenset(_arrows(tokens)) if not mentioned.isdisjoint(_CONNECTORS) else frozenset(),
    )


def _numbers(tokens: Sequence[_Token]) -> tuple[list[tuple[int, int, float]], bool]:
    """(first token, last token, value) in order; and whether a soft one was seen.
    A lone "one" is soft ("combine them into one"); "twenty-one", "one hundred" are numbers."""
    found: list[tuple[int, int, float]] = []
    soft = False
    i = 0
    while i < len(tokens):
        token, info = tokens[i], tokens[i].info
        if token.kind == "num":
            found.append((i, i, token.value))
        elif info.number is not None or info.scale is not None:
            end, value = _spelled(tokens, i)
            if token.key == "one" and end == i:
                soft = True
            else:
                found.append((i, end, value))
            i = end
        soft = soft or info.soft_one
        i += 1
    return found, soft


def _spelled(tokens: Sequence[_Token], i: int) -> tuple[int, float]:
    """'one hundred and five' -> (index of 'five', 105.0)."""
    total = current = 0.0
    end = i
    for j in range(i, len(tokens)):
        info = tokens[j].info
        if tokens[j].key == "and" and j > i and j + 1 < len(tokens):
            continue
        if info.number is not None and (j == i or not info.alone):
            current += info.number
            if info.alone:
                return j, current
        elif info.scale is not None:
            current = max(current, 1.0) * info.scale
            if info.scale >= 1000:
                total, current = total + current, 0.0
        else:
            break
        end = j
    return end, total + current


def _quantities(
    tokens: Sequence[_Token], numbers: Sequence[tuple[int, int, float]]
) -> Iterable[tuple[float, str]]:
    for start, end, value in numbers:
        if start > 0 and tokens[start - 1].kind == "cur":
            yield value, tokens[start - 1].key
            continue
        unit = _unit_at(tokens, end + 1, after_number=True)
        if unit is not None:
            yield value, unit


def _timings(tokens: Sequence[_Token], numbers: Sequence[tuple[int, int, float]]) -> Iterable[str]:
    """The word before a duration: "in 5 minutes" is a delay, "for 5 minutes" a duration."""
    for start, end, _ in numbers:
        before = tokens[start - 1].key if start > 0 else ""
        if before in TIMINGS and _unit_at(tokens, end + 1, after_number=True) in _DURATIONS:
            yield before


def _unit_at(tokens: Sequence[_Token], i: int, after_number: bool) -> str | None:
    if i >= len(tokens):
        return None
    info = tokens[i].info
    if info.unit is None or (info.unit_after_number and not after_number):
        return None
    if info.unit == "degree":  # "180 degrees Celsius" is in Celsius
        following = _unit_at(tokens, i + 1, after_number=False)
        if following in _TEMPERATURES:
            return following
    return info.unit


def _units(tokens: Sequence[_Token]) -> Iterable[str]:
    for i, token in enumerate(tokens):
        if token.info.unit is None:
            continue
        unit = _unit_at(tokens, i, after_number=i > 0 and tokens[i - 1].kind == "num")
        if unit is not None and (unit != "degree" or _unit_at(tokens, i + 1, False) is None):
            yield unit


def _ordinals(tokens: Sequence[_Token]) -> Iterable[int]:
    for i, token in enumerate(tokens):
        if token.kind == "ord":
            yield int(token.value)
        rank = token.info.ordinal
        if rank is not None and not (i > 0 and tokens[i - 1].kind == "num"):  # "10 second"
            yield rank


def _entities(tokens: Sequence[_Token]) -> tuple[tuple[str, str], ...]:
    found: dict[str, str] = {}
    capitalised: list[_Token] = []
    previous = ""
    for token in tokens:
        if token.kind == "word" and not _plain_word(token, previous):
            key = _entity(token, previous)
            if key is not None:
                found.setdefault(key, token.text)
            elif not token.initial and token.text[0].isupper() and token.key not in NOT_NAMES:
                capitalised.append(token)
        previous = token.key
    if capitalised and _names_by_case(tokens):
        for token in capitalised:
            found.setdefault(token.whole, token.text)
    return tuple(found.items())


def _names_by_case(tokens: Sequence[_Token]) -> bool:
    """Shouting or Title Case capitalises everything: the capitals say nothing then."""
    inner = [t.text for t in tokens if t.kind == "word" and not t.initial]
    return len(inner) < 3 or sum(not text.islower() for text in inner) < 0.75 * len(inner)


def _plain_word(token: _Token, previous: str) -> bool:
    """The common case, decided quickly: a lowercase word that names nothing."""
    text = token.text
    return (
        text.islower()
        and token.info.entity is None
        and not token.code
        and "_" not in text
        and "." not in text
        and (len(text) > 1 or previous not in LETTER_NAMES)
    )


def _entity(token: _Token, previous: str) -> str | None:
    """A name whatever the case around it: known, code, an identifier, "vitamin D"."""
    if token.info.entity is not None:
        return token.info.entity
    text = token.text
    if token.code or "_" in text or "." in text or _IDENTIFIER.search(text):
        return token.whole
    if len(text) == 1 and previous in LETTER_NAMES:
        return token.key
    return None


def _mentioned(tokens: Sequence[_Token]) -> set[str]:
    words: set[str] = set()
    for token in tokens:
        words.add(token.key)
        words.add(token.whole)
        if token.info.entity is not None:
            words.add(token.info.entity)
        if "." in token.key or "_" in token.key:
            words.update(re.split(r"[._]", token.key))
    return words


def _quoted(text: str) -> Iterable[str]:
    for match in _QUOTED.finditer(text):
        yield plain(next(group for group in match.groups() if group))


def plain(text: str) -> str:
    """Lowercase, quote marks dropped: where quoted text is looked for."""
    return " ".join(re.sub(r"[`\"“”‘’]|(?<!\w)'|'(?!\w)", " ", text.lower()).split())


def _arrows(tokens: Sequence[_Token]) -> Iterable[tuple[str, str, str]]:
    """Neighbours of "to", "after", "before", articles skipped, stemmed: "a string to an integer"
    -> ("string", "to", "integer"); "swim after eating" -> ("swim", "after", "eat")."""
    content = [t.info.unit or t.key for t in tokens if t.key not in SKIPPED]
    for i in range(1, len(content) - 1):
        connector = _CONNECTORS.get(content[i])
        if connector is not None:
            yield _stem(content[i - 1]), connector, _stem(content[i + 1])


def _stem(word: str) -> str:
    """Just enough to see "swimming" as "swim" and "eating" as "eat"."""
    for suffix in ("ing", "ed", "s"):
        if word.endswith(suffix) and len(word) > len(suffix) + 2:
            word = word[: -len(suffix)]
            break
    doubled = len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiouls"
    return word[:-1] if doubled else word
