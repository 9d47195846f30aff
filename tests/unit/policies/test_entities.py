"""The rules on top of the names model (policies/entities.py, policies/medical.py): which spans
name a person, when a medical term is health information about someone, what the model reads."""

from __future__ import annotations

import pytest

from policies.entities import agreed, found, full_names, model_text, read_by_model, unchecked
from policies.medical import names_someone
from policies.payload import payload_of


def spans_of(text: str, *values: str) -> list[tuple[int, int]]:
    """The spans a model would report for `values` in `text`."""
    return [(text.index(value), text.index(value) + len(value)) for value in values]


@pytest.mark.parametrize(
    ("text", "span", "name"),
    [
        ("Ask Ingrid Halvorsen first", "Ingrid Halvorsen", "Ingrid Halvorsen"),
        ("painted by Vincent van Gogh", "Vincent van Gogh", "Vincent van Gogh"),
        ("Dear Mrs. Okonjo, thanks", "Okonjo", "Okonjo"),  # a surname after a title
        ("signed: Zoë Lefèvre-Dupont.", "Zoë Lefèvre-Dupont.", "Zoë Lefèvre-Dupont"),
        ('{"assignee": "Ravi Shankar"}', 'Ravi Shankar"}', "Ravi Shankar"),
        ("1. Lena Fox - passport X1", "Lena Fox - passport", "Lena Fox"),  # cut at the dash
        ("Tom Ek\n- Ann Lo", "Tom Ek\n- Ann Lo", "Tom Ek"),  # cut at the line break
    ],
)
def test_a_full_name_or_a_titled_surname_is_a_person(text: str, span: str, name: str) -> None:
    assert full_names(text, spans_of(text, span)) == [name]


@pytest.mark.parametrize(
    ("text", "span"),
    [
        ("Hi Sarah, thanks", "Sarah"),  # a first name alone identifies nobody
        ("the call_4_XBri-o0L7 tool", "call_4_XBri-o0L7"),  # an id
        ("Returns KYC data", "Returns KYC"),  # an acronym
        ("masked as XXXX XXXX", "XXXX XXXX"),
        ("paid Nordlicht Handel GmbH", "Nordlicht Handel GmbH"),  # a company
        ("the van der Berg", "van der"),  # particles without a name
    ],
)
def test_what_identifies_nobody_is_no_person(text: str, span: str) -> None:
    assert full_names(text, spans_of(text, span)) == []


def test_the_model_reads_json_as_prose_at_the_same_offsets() -> None:
    text = '{"name": "Ravi Shankar", "tier": "gold"}'
    read = model_text(text)
    assert len(read) == len(text)
    assert read[text.index("Ravi") : text.index("Ravi") + 12] == "Ravi Shankar"
    assert '"' not in read
    assert "{" not in read


def test_the_model_reads_only_texts_of_more_than_one_word() -> None:
    body = {"messages": [{"role": "user", "content": "Ring Ada Byron"}], "user": "u-17"}
    payload = payload_of(body)
    assert [payload.texts[i] for i in read_by_model(payload)] == ["Ring Ada Byron"]


@pytest.mark.parametrize("text", ["山東昭子", "ชื่อกนกเนตรดีตพันธุ์", "ឈ្មោះសុខា", "နာမည်မောင်မောင်"])
def test_the_model_reads_a_text_of_an_unspaced_script_however_few_its_spaces(text: str) -> None:
    body = {"messages": [{"role": "user", "content": text}, {"role": "user", "content": "OK"}]}
    payload = payload_of(body)
    assert [payload.texts[i] for i in read_by_model(payload)] == [text]


def test_every_span_of_the_multilingual_tagger_is_a_person() -> None:
    body = {"messages": [{"role": "user", "content": "漫画家・岡部冬彦が描いた"}]}
    payload = payload_of(body)
    index = payload.texts.index("漫画家・岡部冬彦が描いた")
    result = found(payload, ["person"], {index: []}, {index: [(4, 8)]})
    assert result.values == {"person": ("岡部冬彦",)}
    assert result.reason("person") == "detected person in messages[0].content"


def test_found_names_the_path_and_keeps_the_values_for_redaction() -> None:
    body = {"messages": [{"role": "user", "content": "Ring Ada Byron about it"}]}
    payload = payload_of(body)
    index = payload.texts.index("Ring Ada Byron about it")
    result = found(payload, ["person"], {index: spans_of(payload.texts[index], "Ada Byron")})
    assert result.fired == ["person"]
    assert result.values == {"person": ("Ada Byron",)}
    assert result.reason("person") == "detected person in messages[0].content"


@pytest.mark.parametrize(
    "text",
    [
        "My son was diagnosed with epilepsy in March",
        "I take 20 mg of fluoxetine every morning",
        "The patient is on warfarin after a stroke",
        "She's pregnant and I need to tell HR",
    ],
)
def test_a_medical_term_said_of_someone_is_health_information(text: str) -> None:
    payload = payload_of({"messages": [{"role": "user", "content": text}]})
    assert found(payload, ["medical"], {}).fired == ["medical"]


@pytest.mark.parametrize(
    "text",
    [
        "What is the usual adult dose of paracetamol?",
        "Explain how insulin regulates blood sugar",
        "Summarise the history of tuberculosis treatment",
        "My build fails with a segmentation fault",  # someone, but no medical term
    ],
)
def test_a_medical_question_about_nobody_is_not(text: str) -> None:
    payload = payload_of({"messages": [{"role": "user", "content": text}]})
    assert found(payload, ["medical"], {}).fired == []


def test_a_person_named_elsewhere_in_the_request_makes_a_term_personal() -> None:
    body = {
        "messages": [{"role": "user", "content": "Summarise: asthma, salbutamol as needed"}],
        "user": "Priya Raman",
    }
    payload = payload_of(body)
    index = payload.texts.index("Priya Raman")
    result = found(payload, ["medical"], {index: spans_of("Priya Raman", "Priya Raman")})
    assert result.fired == ["medical"]  # person itself is not enabled: not reported
    assert set(result.values["medical"]) == {"asthma", "salbutamol"}
    assert "person" not in result.values


def test_someone_is_named_in_the_texts_own_words() -> None:
    assert names_someone("I have a rash")
    assert names_someone("Mr. Osei was admitted")
    assert not names_someone("In 1921 Banting isolated insulin")  # no cue: the names model's part


def test_what_was_not_checked_counts_as_found() -> None:
    result = unchecked(["person", "medical"], "not checked in time")
    assert result.fired == ["person", "medical"]
    assert result.reason("medical") == "medical: not checked in time"


def test_an_english_name_counts_where_the_multilingual_tagger_leans_toward_one() -> None:
    """ "Fecha de Ingreso" is two capitalised words to the English model; the multilingual
    tagger, reading Spanish, sees no name there, so it does not count."""
    text = "Fecha de Ingreso: 04/12/2017. Paciente: Ernesto García."
    english = [(0, 16), (40, 54)]
    leaning = [(40, 47)]  # "Ernesto" alone is enough to agree on "Ernesto García"
    assert agreed(english, leaning) == [(40, 54)]
    assert [text[a:b] for a, b in agreed(english, leaning)] == ["Ernesto García"]


@pytest.mark.parametrize(
    ("leaning", "kept"),
    [
        ([], []),
        ([(10, 20)], []),  # touching at the end is not overlapping
        ([(0, 5)], []),  # touching at the start neither
        ([(9, 11)], [(5, 10)]),
        ([(12, 30), (0, 6)], [(5, 10)]),  # in any order
        ([(0, 40), (6, 8)], [(5, 10)]),  # one span inside another
    ],
)
def test_agreement_is_overlap(leaning: list[tuple[int, int]], kept: list[tuple[int, int]]) -> None:
    assert agreed([(5, 10)], leaning) == kept
