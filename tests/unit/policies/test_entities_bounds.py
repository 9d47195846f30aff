"""policies/entities.py on hostile input: each step is linear in what it reads, shown by
counting the work (comparisons, characters handed to a pattern), never by timing it; and the
results stay those of the plain rules."""

from __future__ import annotations

from typing import Any

import pytest

from policies import entities
from policies.entities import found, full_names
from policies.payload import payload_of
from policies.pii import SCAN_LIMIT_CHARS


class Compared(str):
    """A found value that counts how often it is compared with another."""

    times = 0

    def __eq__(self, other: object) -> bool:
        Compared.times += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


class Encoded(bytes):
    """A text's UTF-8 whose slices decode to Compared values."""

    def __getitem__(self, key: Any) -> Any:
        got = bytes.__getitem__(self, key)
        return Encoded(got) if isinstance(got, bytes) else got

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return Compared(bytes.decode(self, encoding, errors))


def test_distinct_terms_are_kept_once_each_without_comparing_each_with_all(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(entities, "to_bytes", lambda text: Encoded(text.encode()))
    monkeypatch.setattr(Compared, "times", 0)
    doses = [f"{i}mg" for i in range(2000)]
    payload = payload_of({"messages": [{"role": "user", "content": "my " + " ".join(doses)}]})
    result = found(payload, ["medical"], {})
    compared = Compared.times
    assert compared < len(doses)  # a list's `in` made ~2,000,000 comparisons
    assert result.values["medical"] == tuple(doses)  # each once, first seen first


def test_a_repeated_term_is_kept_once() -> None:
    payload = payload_of({"messages": [{"role": "user", "content": "my asthma, asthma, 5 mg"}]})
    assert found(payload, ["medical"], {}).values["medical"] == ("asthma", "5 mg")


class Handed:
    """Stands in for the title pattern: counts the characters it is asked to search."""

    def __init__(self, pattern: Any) -> None:
        self.pattern, self.chars = pattern, 0

    def search(self, text: str, *args: Any) -> Any:
        self.chars += len(text)
        return self.pattern.search(text, *args)


def test_the_title_before_each_span_is_read_in_a_few_characters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    handed = Handed(entities._TITLE)
    monkeypatch.setattr(entities, "_TITLE", handed)
    text = "Holmes said. " * 4000
    spans = [(i * 13, i * 13 + 6) for i in range(4000)]
    assert full_names(text, spans) == []  # a surname alone, no title: nobody
    # each span's title looked for in a few characters, not in all the text before it
    assert handed.chars <= 16 * len(spans)


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("Dear Mrs. Okonjo, thanks", "Okonjo"),
        ("Dear Mrs.        Okonjo", "Okonjo"),  # any number of spaces after the title
        ("Dear MRS Okonjo", "Okonjo"),
        ("Dr.Okonjo", "Okonjo"),
        ("srta. Okonjo", "Okonjo"),  # at the very start of the text
    ],
)
def test_a_surname_after_a_title_is_a_person(text: str, name: str) -> None:
    start = text.index(name)
    assert full_names(text, [(start, start + len(name))]) == [name]


@pytest.mark.parametrize(
    "text",
    [
        "Mrs Smith said hello to Okonjo",  # the title is another name's
        "Hamr. Okonjo",  # "mr" inside a word is no title
        "Mrs\nOkonjo",  # a line break is no space
        "Mrs. - Okonjo",
    ],
)
def test_a_surname_without_a_title_just_before_it_is_nobody(text: str) -> None:
    start = text.rindex("Okonjo")
    assert full_names(text, [(start, start + 6)]) == []


def test_single_words_count_toward_the_limit_when_terms_are_looked_for() -> None:
    """Medical terms are looked for in every text, single words included: they count."""
    words = [f"{i}mg" for i in range(30_000)]  # ~170,000 characters, no text of two words
    payload = payload_of({"messages": [{"role": "user", "content": "hi"}], "tags": words})
    assert entities.to_read(payload, ["person", "medical"]) is None  # past the limit: not read
    assert entities.to_read(payload, ["person"]) == []  # names are looked for in sentences only


def test_texts_past_the_payloads_cap_cannot_be_read_and_count_as_unread() -> None:
    """A payload keeps texts up to the scan's cap: a name written after it is not in it."""
    body = {"messages": [{"role": "user", "content": "x" * SCAN_LIMIT_CHARS}], "n": "Ada Byron"}
    assert entities.to_read(payload_of(body), ["person"]) is None
