"""policies/re2text.py's candidate walks stay linear through the RE2 wrapper: it encodes a str,
and counts its offsets back from 0, at every call (a walk over a str would be quadratic), so a
walk hands it the text's bytes, the same object each time, from where the last candidate ended."""

from __future__ import annotations

from typing import Any

from policies.medical import _TERM
from policies.re2text import spans


class Seeing:
    """Stands in for a pattern: notes what each search is handed."""

    def __init__(self, pattern: Any) -> None:
        self.pattern, self.groups = pattern, pattern.groups
        self.handed: list[tuple[object, int]] = []

    def search(self, data: bytes, pos: int = 0) -> Any:
        self.handed.append((data, pos))
        return self.pattern.search(data, pos)


def test_a_walk_hands_the_same_bytes_to_every_search_from_where_it_left_off() -> None:
    data = b"my 1mg, 2mg and 3mg of insulin"
    seeing = Seeing(_TERM)
    found = [data[start:end] for start, end in spans(seeing, data)]
    assert found == [b"1mg", b"2mg", b"3mg", b"insulin"]
    assert all(handed is data for handed, _ in seeing.handed)
    starts = [pos for _, pos in seeing.handed]
    assert starts == sorted(set(starts))  # always further on, never from the start again
    assert len(starts) == len(found) + 1
