"""The detectors read a spelled-out value as a model does, and a request holding one never
leaves redacted (no placeholder can stand in for words spread over a sentence)."""

from __future__ import annotations

import pytest

from policies.pii import DETECTORS, scan
from policies.redaction import NotRedactable, redacted_body

faker = pytest.importorskip("faker")
num2words = pytest.importorskip("num2words")


def spelled_digits(number: str, lang: str) -> str:
    groups = number.split()
    return ", ".join(
        " ".join(num2words.num2words(int(d), lang=lang) for d in group if d.isdigit())
        for group in groups
    )


@pytest.mark.parametrize(("locale", "lang"), [("en_US", "en"), ("de_DE", "de"), ("es_ES", "es")])
def test_a_phone_number_read_out_digit_by_digit_is_a_phone_number(locale: str, lang: str) -> None:
    fake = faker.Faker(locale)
    fake.seed_instance(7)
    for _ in range(5):
        number = fake.numerify("### ### ####")
        text = f"{fake.name()}: {spelled_digits(number, lang)}"
        assert "phone" in scan([text], DETECTORS).fired, text


def test_an_address_written_with_words_for_its_symbols_is_an_email() -> None:
    fake = faker.Faker()
    fake.seed_instance(8)
    for _ in range(5):
        user, domain = fake.free_email().split("@")
        name, tld = domain.rsplit(".", 1)
        text = f"write to {user} [at] {name} [dot] {tld} please"
        assert scan([text], DETECTORS).fired == ["email"], text


def test_plain_prose_with_at_and_numbers_in_words_is_not_spelled_data() -> None:
    text = "Meet me at noon; bring two or three friends and look at the dot on the map."
    assert scan([text], DETECTORS).fired == []


def test_a_spelled_value_keeps_the_request_from_leaving_redacted() -> None:
    body = {"messages": [{"role": "user", "content": "mail jsmith at exemplo dot org now"}]}
    with pytest.raises(NotRedactable):
        redacted_body(body, ["email"])
