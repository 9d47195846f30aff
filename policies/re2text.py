"""RE2 for the detectors: patterns written with Python's \\d, \\D, \\w and \\s keep Python's
(Unicode) meaning, and the helpers every detector shares to walk candidates in linear time (pure).

RE2 has no lookaround, so a pattern spells a lookbehind as a character it consumes before the
candidate (or the start of the text) and a lookahead as one it consumes after; a candidate is
the pattern's first group that took part, and the next search starts again where the candidate
itself ended, so the character after one candidate can still be the one before the next.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

import re2  # type: ignore[import-untyped]

# Python's \d, \D, \w and \s are Unicode-aware, RE2's are ASCII; these keep Python's meaning (from
# RE2's Unicode tables, which may be a version ahead of Python's). \w and \s only inside [...].
_DIGIT = r"\p{Nd}"
_NOT_DIGIT = r"\P{Nd}"
_WORD = r"\p{L}\p{N}_"
_SPACE = (
    r"\t-\r\x{1c}-\x{20}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}"
    r"\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}"
)


class Match(Protocol):
    def span(self, group: int = ...) -> tuple[int, int]: ...


class Pattern(Protocol):
    @property
    def groups(self) -> int: ...

    def search(self, text: bytes, pos: int = ...) -> Match | None: ...


def compile_unicode(pattern: str, max_mem: int = 0) -> Pattern:
    r"""A pattern written with Python's \d, \D, \w and \s, for RE2, with their meaning.
    `max_mem`: more memory than RE2's default 8 MiB for a pattern of many words that its
    automaton needs to stay fast (it falls back to a slower, still linear, search without)."""
    unicode = pattern.replace(r"\d", _DIGIT).replace(r"\D", _NOT_DIGIT)
    unicode = unicode.replace(r"\w", _WORD).replace(r"\s", _SPACE)
    if not max_mem:
        return re2.compile(unicode)  # type: ignore[no-any-return]
    options = re2.Options()
    options.max_mem = max_mem
    compiled: Pattern = re2.compile(unicode, options)
    return compiled


ASCII_NON_DIGITS = bytes(byte for byte in range(128) if not 0x30 <= byte <= 0x39)


def to_bytes(text: str) -> bytes:
    # A lone surrogate (JSON allows "\ud800") is not UTF-8: "?" stands in, a character no
    # pattern takes either.
    return text.encode("utf-8", "replace")


def spans(pattern: Pattern, data: bytes) -> Iterator[tuple[int, int]]:
    """Where the candidates are (the first group that took part, or the whole match for a
    pattern without groups), left to right, not overlapping. Each search starts where the last
    candidate ended (one byte on, at least): linear in `data` in all."""
    groups = range(1, pattern.groups + 1) or range(1)
    pos = 0
    while (found := pattern.search(data, pos)) is not None:
        start, end = next(span for group in groups if (span := found.span(group))[0] >= 0)
        pos = max(end, pos + 1)
        yield start, end


def candidates(pattern: Pattern, data: bytes) -> Iterator[bytes]:
    return (data[start:end] for start, end in spans(pattern, data))


def blank(
    pattern: Pattern, data: bytes, only: Callable[[bytes], bool] = lambda candidate: True
) -> bytes:
    """`data` with each candidate (that `only` accepts) replaced by as many spaces: what is
    found in the result is found at the same place in `data`."""
    pieces: list[bytes] = []
    end = 0
    for start, stop in spans(pattern, data):
        if not only(data[start:stop]):
            continue
        pieces += (data[end:start], b" " * (stop - start))
        end = stop
    pieces.append(data[end:])
    return b"".join(pieces)


def digits_of(candidate: bytes) -> str:
    if candidate.isascii():
        return candidate.translate(None, ASCII_NON_DIGITS).decode()
    return "".join(filter(str.isdecimal, candidate.decode()))


Finder = Callable[[bytes], Iterator[tuple[int, int]]]


def detector_of(finder: Finder) -> Callable[[str], bool]:
    """A detector from a finder: does it find anything in the text (stopping at the first)."""

    def detects(text: str) -> bool:
        return next(finder(to_bytes(text)), None) is not None

    return detects
