"""policies/redaction.py: placeholders go out, values come back, streamed or not, however the
stream is cut, holding back only what may be a placeholder still arriving."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.privacy_corpus import load
from policies.payload import payload_of
from policies.pii import DETECTORS
from policies.redaction import MAX_PLACEHOLDER, Placeholders, Span, Unmasker, found, redacted


def test_a_value_gets_one_placeholder_per_request_and_each_kind_counts_apart() -> None:
    places = Placeholders()
    assert places.of("email", "jane@exemplo.com") == "<EMAIL_1>"
    assert places.of("email", "bob@exemplo.com") == "<EMAIL_2>"
    assert places.of("email", "jane@exemplo.com") == "<EMAIL_1>"
    assert places.of("phone", "+44 20 7946 0958") == "<PHONE_1>"


def test_spans_are_replaced_and_restored() -> None:
    text = "Mail jane@exemplo.com or call +44 20 7946 0958, jane@exemplo.com again."
    spans = [Span(5, 21, "email"), Span(30, 46, "phone"), Span(48, 64, "email")]
    places = Placeholders()
    out = redacted(text, spans, places)
    assert out == "Mail <EMAIL_1> or call <PHONE_1>, <EMAIL_1> again."
    assert places.restore(out) == text


def test_overlapping_spans_leave_as_one_placeholder() -> None:
    places = Placeholders()
    out = redacted("id 123-45-6789 end", [Span(3, 14, "us_ssn"), Span(7, 14, "phone")], places)
    assert out == "id <US_SSN_1> end"


def test_unknown_placeholders_and_plain_angle_brackets_pass_untouched() -> None:
    places = Placeholders()
    places.of("email", "a@b.co")
    text = "if a < b and <PERSON_9> or <html> then <EMAIL_1>"
    assert places.restore(text) == "if a < b and <PERSON_9> or <html> then a@b.co"


def test_a_placeholder_split_across_chunks_is_restored() -> None:
    places = Placeholders()
    places.of("email", "jane@exemplo.com")
    unmask = Unmasker(places)
    sent = [
        unmask.feed("Write to <EM"),
        unmask.feed("AIL_"),
        unmask.feed("1> today"),
        unmask.flush(),
    ]
    assert sent == ["Write to ", "", "jane@exemplo.com today", ""]


def test_nothing_is_held_back_that_cannot_be_a_placeholder() -> None:
    unmask = Unmasker(Placeholders())
    assert unmask.feed("a < b, <html> and <Em") == "a < b, <html> and <Em"
    assert unmask.feed("x <TOOL") == "x "
    assert unmask.flush() == "<TOOL"


PIECES = st.sampled_from(["Hi ", "<EMAIL_1>", "<PHONE_2>", " and ", "<", "EMAIL", "<X", ">", "é"])


@settings(max_examples=300, deadline=None)
@given(st.lists(PIECES, max_size=20).map("".join), st.data())
def test_however_a_stream_is_cut_the_client_reads_the_restored_text(
    text: str, data: st.DataObject
) -> None:
    places = Placeholders()
    places.of("email", "jane@exemplo.com")
    places.of("phone", "+1 415 555 0100")
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=8)))
    chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    unmask = Unmasker(places)
    out = []
    for chunk in chunks:
        out.append(unmask.feed(chunk))
        assert len(unmask._held) <= MAX_PLACEHOLDER  # held back: at most a placeholder's length
    out.append(unmask.flush())
    assert "".join(out) == places.restore(text)


def test_after_redaction_no_detector_finds_anything_in_the_corpus() -> None:
    """Every request of the labelled corpus, every text: what leaves redacted holds nothing a
    detector would find, and restoring it gives back the text as the detectors read it."""
    enabled = list(DETECTORS)
    checked = 0
    for case in load():
        for text in payload_of(case.body).texts:
            spans = found(text, enabled)
            if not spans:
                continue
            places = Placeholders()
            out = redacted(text, spans, places)
            assert found(out, enabled) == [], (case.id, out)
            assert places.restore(out) == text
            checked += 1
    assert checked >= 150


def test_non_ascii_text_around_a_span_survives() -> None:
    text = "Müller écrit à jane@exemplo.com — merci"
    places = Placeholders()
    out = redacted(text, found(text, ["email"]), places)
    assert out == "Müller écrit à <EMAIL_1> — merci"
    assert places.restore(out) == text
