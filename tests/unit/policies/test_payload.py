"""policies/payload.py: every string a request carries, normalised as a model reads it, with
where it sits; media data counted, never read as text. And classify() on top of it: reasons
name the detector and the field, never the value."""

from __future__ import annotations

import base64
import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.model import Privacy, PrivacyLevel
from policies.payload import _walk, normalized, payload_of, unescaped
from policies.privacy import classify
from policies.redaction import redacted_body

LEVELS = (PrivacyLevel("public"), PrivacyLevel("restricted", "none"))
EVERY_DETECTOR = dict.fromkeys(("email", "phone", "payment_card", "us_ssn", "iban"), "restricted")
POLICY = Privacy(LEVELS, "public", {**EVERY_DETECTOR, "ip_address": "restricted"})


def level(body: dict[str, Any], privacy: Privacy = POLICY) -> tuple[str, tuple[str, ...]]:
    result = classify(privacy, header=None, body={"model": "m", **body}, tenant=None)
    return result.level, result.reasons


def chat(*contents: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": c} for c in contents]}


@pytest.mark.parametrize(
    ("written", "read"),
    [
        ("\uff14\uff11\uff11\uff11", "4111"),  # fullwidth digits
        ("\u0664\u0661\u0661", "411"),  # Arabic-Indic digits
        ("\u096a\u0967", "41"),  # Devanagari digits
        ("jane\u200b@exemplo.com", "jane@exemplo.com"),  # zero-width space
        ("ja\u00adne@exa\u2060mple.com", "jane@example.com"),  # soft hyphen, word joiner
        ("\u202ejane@exemplo.com\u202c", "jane@exemplo.com"),  # bidirectional overrides
        ("\uff4a\uff41\uff4e\uff45\uff20example.com", "jane@example.com"),  # fullwidth letters, @
        ("\ufb01le", "file"),  # a ligature
        ("plain ascii stays", "plain ascii stays"),
    ],
)
def test_text_is_read_as_a_model_reads_it(written: str, read: str) -> None:
    assert normalized(written) == read


@pytest.mark.parametrize(
    "written",
    [
        "mail me at jane\u200b.doe@exemplo.com",
        "card \uff14\uff15\uff13\uff19 1488 0343 6467",
        "ssn \u0661\u0662\u0663-\u0664\u0665-\u0666\u0667\u0668\u0669",
        "call +44\u00a020\u00a07946\u00a00958 today",
    ],
    ids=["zero-width email", "fullwidth card", "arabic-indic ssn", "no-break spaces"],
)
def test_disguised_personal_data_is_detected(written: str) -> None:
    assert level(chat(written))[0] == "restricted"


def test_every_string_is_read_with_its_path() -> None:
    body = {
        "user": "u-1",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "hello"}]},
        ],
        "tools": [{"type": "function", "function": {"name": "f", "description": "looks up"}}],
    }
    payload = payload_of({"model": "secret-model-name", **body})
    located = dict(zip(payload.paths, payload.texts, strict=True))
    assert located["user"] == "u-1"
    assert located["messages[0].content"] == "be brief"
    assert located["messages[1].content[0].text"] == "hello"
    assert located["tools[0].function.description"] == "looks up"
    assert "secret-model-name" not in payload.texts


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"user": "jane@exemplo.com"}, "user"),
        (chat("hi", "hi", "write to jane@exemplo.com"), "messages[2].content"),
        ({"metadata": {"owner": "jane@exemplo.com"}}, "metadata.owner"),
        (
            {"prediction": {"type": "content", "content": "SSN 123-45-6789"}},
            "prediction.content",
        ),
        ({"suffix": "call +1 415 555 0100"}, "suffix"),
        ({"input": ["ok", "card 4539 1488 0343 6467"]}, "input[1]"),
        (
            {"response_format": {"json_schema": {"description": "for jane@exemplo.com"}}},
            "response_format.json_schema.description",
        ),
    ],
)
def test_a_reason_names_the_detector_and_the_field_never_the_value(
    body: dict[str, Any], where: str
) -> None:
    found, reasons = level(body)
    assert found == "restricted"
    assert any(reason.endswith(f" in {where}: restricted") for reason in reasons), reasons
    assert not any("jane@" in r or "6789" in r or "4111" in r or "555" in r for r in reasons)


def random_image(size: int, seed: int) -> str:
    data = random.Random(seed).randbytes(size)
    return "data:image/png;base64," + base64.b64encode(data).decode()


@pytest.mark.parametrize("seed", range(5))
def test_image_data_is_never_read_as_text(seed: int) -> None:
    """Random base64 is letters and digits: read as text, it looks like IBANs and cards."""
    part = {"type": "image_url", "image_url": {"url": random_image(100_000, seed)}}
    payload = payload_of(chat([{"type": "text", "text": "what is this?"}, part]))
    assert payload.media == ("messages[0].content[1].image_url.url",)
    assert all(len(text) < 100 for text in payload.texts)
    assert level(chat([part])) == ("public", ("policy default: public",))


@pytest.mark.parametrize(
    "part",
    [
        {"type": "input_audio", "input_audio": {"data": "UklGR" * 1000, "format": "wav"}},
        {"type": "file", "file": {"file_data": "JVBERi0" * 1000, "filename": "report.pdf"}},
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ"}},
    ],
    ids=["audio", "file", "data url"],
)
def test_media_data_is_counted_not_read(part: dict[str, Any]) -> None:
    payload = payload_of(chat([part]))
    assert len(payload.media) == 1
    assert not any(len(text) > 100 for text in payload.texts)


def test_what_leaves_with_a_media_part_is_still_read() -> None:
    """A URL or a file name is text that leaves with the request."""
    url = {"type": "image_url", "image_url": {"url": "https://x.test/jane@exemplo.com.png"}}
    named = {"type": "file", "file": {"file_data": "JVBER", "filename": "jane@exemplo.com.pdf"}}
    assert level(chat([url]))[0] == "restricted"
    assert level(chat([named]))[0] == "restricted"


def test_the_policy_sets_a_level_for_requests_that_carry_media() -> None:
    privacy = Privacy(LEVELS, "public", EVERY_DETECTOR, media="restricted")
    part = {"type": "image_url", "image_url": {"url": random_image(1000, 1)}}
    assert level(chat([part]), privacy) == (
        "restricted",
        ("media at messages[0].content[0].image_url.url: restricted",),
    )
    assert level(chat("no media here"), privacy)[0] == "public"


_KEYS = st.sampled_from(["", "data", "file_data", "type", "x.data", "text", "url", "a"])
_LEAVES = st.one_of(
    st.sampled_from(["image_url", "file", "data:image/png;base64,AAAA", "hi", ""]),
    st.text(max_size=5),
    st.integers(),
    st.none(),
)
_BODIES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_KEYS, inner, max_size=4)),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_KEYS, _BODIES, max_size=5))
def test_texts_and_media_are_what_the_walk_with_paths_finds(body: dict[str, Any]) -> None:
    """The texts are read without their paths (a string each saved on every request), and the
    paths found again only when a reason names one: both walks must see the same strings, each
    as media or as text alike, whatever the body's shape (empty keys, dotted keys, media parts
    at any depth)."""
    payload = payload_of(body)
    walked = list(_walk({k: v for k, v in body.items() if k != "model"}, True))
    assert payload.texts == tuple(normalized(text) for _, text, media in walked if not media)
    assert payload.paths == tuple(path for path, _, media in walked if not media)
    assert payload.media == tuple(path for path, _, media in walked if media)
    assert payload.carries_media == any(media for _, _, media in walked)


@pytest.mark.parametrize("kind", [[], {}, ["image_url"], 3, None])
def test_a_part_whose_type_is_not_text_is_read_as_any_other(kind: object) -> None:
    """A client's `type` may be any JSON value: a list or an object is no key of the set of
    media types (it raised TypeError, a 500, on the detectors' and redaction's walks)."""
    body = chat([{"type": kind, "text": "write to jane@exemplo.com"}])
    assert level(body)[0] == "restricted"
    redacted, places = redacted_body(body, EVERY_DETECTOR)
    assert "jane@exemplo.com" not in str(redacted)
    assert places


def test_json_escapes_are_read_as_the_characters_they_spell() -> None:
    record = json.dumps({"note": "岡部冬彦 😀 mail: jsmith@corp.example"})
    payload = payload_of({"messages": [{"role": "tool", "content": record}]})
    assert '{"note": "岡部冬彦 😀 mail: jsmith@corp.example"}' in payload.texts


def test_escapes_that_would_break_json_stay_escaped() -> None:
    assert (
        unescaped(r"say \u0022hi\u0022 \u005c \u000a \u0041")
        == r"say \u0022hi\u0022 \u005c \u000a A"
    )


def test_a_lone_surrogate_reads_as_a_replacement_character() -> None:
    assert unescaped(r"a\ud83d b") == "a\ufffd b"


def test_an_escape_is_never_cut_between_pieces() -> None:
    text = "x" * 8190 + r"\u5ca1" + "y"
    assert unescaped(text) == "x" * 8190 + "岡" + "y"


def test_unescaping_stops_past_the_limit() -> None:
    text = r"\u5ca1" * 100_000
    assert len(unescaped(text, limit=10_000)) < 20_000
