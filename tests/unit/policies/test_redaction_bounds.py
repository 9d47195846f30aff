"""policies/redaction.py on hostile input: restoring an answer and finding the names model's
values read a text once, however many placeholders or values there are (the work is counted,
never timed); every place a value is written is covered, overlapping ones too."""

from __future__ import annotations

from typing import Any

import pytest

from policies import redaction
from policies.redaction import Placeholders, redacted, redacted_body, written


class Handed:
    """Stands in for the placeholder pattern: counts the characters of each text it is given
    (the RE2 wrapper encodes the whole of a str at every call, whatever `pos` says)."""

    def __init__(self, pattern: Any) -> None:
        self.pattern, self.chars = pattern, 0

    def search(self, text: str, *args: Any) -> Any:
        self.chars += len(text)
        return self.pattern.search(text, *args)

    def finditer(self, text: str, *args: Any) -> Any:
        self.chars += len(text)
        return self.pattern.finditer(text, *args)


def test_an_answer_of_many_placeholders_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    handed = Handed(redaction._PLACEHOLDER)
    monkeypatch.setattr(redaction, "_PLACEHOLDER", handed)
    places = Placeholders()
    places.of("person", "x")
    text = "<PERSON_1>" * 8000 + "<A_1>"
    assert places.restore(text) == "x" * 8000 + "<A_1>"
    assert handed.chars <= 2 * len(text)  # a search per placeholder read it 8,000 times


class Read(bytes):
    """A text's UTF-8 that counts the bytes read through its methods: what find scans, and
    each byte looked at one by one."""

    bytes_read = 0

    def find(self, sub: Any, start: Any = 0, *args: Any) -> int:
        Read.bytes_read += len(self) - (start or 0)
        return bytes.find(self, sub, start, *args)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, int):
            Read.bytes_read += 1
        return bytes.__getitem__(self, key)


def test_a_text_is_read_once_whatever_the_number_of_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(redaction, "to_bytes", lambda text: Read(text.encode()))
    monkeypatch.setattr(Read, "bytes_read", 0)
    names = [f"Aname{i} Bname{i}" for i in range(2000)]
    text = "Ring Aname7 Bname7 and Aname1999 Bname1999 about it. " + "z" * 100_000
    body = {"model": "m", "messages": [{"role": "user", "content": text}]}
    copy, places = redacted_body(body, [], values={"person": names})
    assert copy["messages"][0]["content"].startswith("Ring <PERSON_1> and <PERSON_2> about")
    assert places.values == {"<PERSON_1>": "Aname7 Bname7", "<PERSON_2>": "Aname1999 Bname1999"}
    assert Read.bytes_read <= 2 * len(text)  # a search per value read it 2,000 times


def leaving(text: str, values: dict[str, list[bytes]]) -> tuple[str, dict[str, str]]:
    """`text` as it leaves with `values` redacted, and what each placeholder stands for."""
    places = Placeholders()
    return redacted(text, written(text, values), places), places.values


def test_every_place_a_value_is_written_is_covered_overlapping_ones_too() -> None:
    assert leaving("see aaa now", {"person": [b"aa"]}) == (
        "see <PERSON_1> now",  # "aa" twice, overlapping: no "a" left over
        {"<PERSON_1>": "aaa"},
    )
    names = {"person": [b"Ada Byron", b"Byron Smith"]}
    assert leaving("Ada Byron Smith", names)[0] == "<PERSON_1>"
    assert leaving("Zoë, Zoë", {"person": ["Zoë".encode()]})[0] == "<PERSON_1>, <PERSON_1>"


def test_written_places_keep_the_first_kind_a_value_was_given() -> None:
    values = {"person": [b"Ada"], "medical": [b"Ada", b"asthma"]}
    assert leaving("Ada: asthma", values)[0] == "<PERSON_1>: <MEDICAL_1>"


def test_names_leave_as_placeholders_as_before() -> None:
    text = "Olu Adeyemi met Ada Byron; Olu Adeyemi paid, Ada Byron Smith too. Byron, too."
    names = {"person": [b"Ada Byron", b"Olu Adeyemi", b"Byron"]}
    out, values = leaving(text, names)
    assert out == (
        "<PERSON_1> met <PERSON_2>; <PERSON_1> paid, <PERSON_2> Smith too. <PERSON_3>, too."
    )
    assert values == {"<PERSON_1>": "Olu Adeyemi", "<PERSON_2>": "Ada Byron", "<PERSON_3>": "Byron"}
