"""policies/pii.py: the built-in detectors of personal data, their checksums and `detect`."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.numbers import iban_valid, luhn_valid
from policies.pii import DETECTORS, SCAN_LIMIT_CHARS, Scan, detect, scan

ALL = tuple(DETECTORS)


def case(text: str, expected: str, *marks: pytest.MarkDecorator) -> Any:
    return pytest.param(text, expected, marks=marks, id=text)


# (text, the one detector expected to fire): each fires that detector and no other.
POSITIVES = [
    case("mail me at jane.doe@exemplo.com", "email"),
    case("contact: J.Smith+news@mail.co.uk", "email"),
    case("x@sub.domain-name.io", "email"),
    case("CEO <first.last@company.com> wrote:", "email"),
    case("Reply-To: support@overspill.dev.", "email"),
    case("call +44 20 7946 0958", "phone"),
    case("(415) 555-0100", "phone"),
    case("415.555.0100", "phone"),
    case("my number is 415-555-0100, thanks", "phone"),
    case("my number is +44 20 7946 0958.", "phone"),
    case("Call 415-555-0100. Ask for Jane.", "phone"),
    case("+1 (415) 555-0100", "phone"),
    case("+1-415-555-0100", "phone"),
    case("+1 415 555 0100", "phone"),
    case("020 7946 0958", "phone"),
    case("(020) 7946 0958", "phone"),
    case("+49 30 1234 5678", "phone"),
    case("+49 (0)30 1234 5678", "phone"),
    case("call 1-800-555-0199", "phone"),
    case("+33 1 42 68 53 00", "phone"),
    case("+44 7700 900123", "phone"),
    case("+14155550100", "phone"),
    case("call +39 3889021471 now", "phone"),  # the country code, then the number unbroken
    case("Telefon: 722 233 820", "phone"),  # a national number after its label
    case("電話：1234-5678", "phone"),
    case("call me on 9472 7916", "phone"),
    case("my phone is 467 3395", "phone"),
    case("Hospital Clínico. Tfno.: 93 416 97 00", "phone"),
    case('{"phone": "0847331695"}', "phone"),  # a JSON key is a label too
    case("phone_number=0847331695", "phone"),  # and a log's field
    case("ナンバー: 神戸 82 め 65-44", "record_number"),  # a plate, in a script without case
    case('{"licence_plate": "NUY-4797"}', "record_number"),
    case("旅券番号: L32472700", "passport"),
    case("PESEL: 44051401359", "national_id"),  # a national ID after its name
    case("T.C. Kimlik No: 10000000146", "national_id"),
    case("ИНН 7707083893", "national_id"),
    case("personnummer 19811218-9876", "national_id"),
    case("11010519491231002X", "national_id"),  # China's resident ID, by its check
    case("Dr. Ruiz  NºCol: 28 28 73512", "record_number"),  # a clinician's licence
    case("Номер паспорта: AB1234567", "passport"),
    case("4539 1488 0343 6467", "payment_card"),
    case("4539-1488-0343-6467", "payment_card"),
    case("card 4539148803436467 exp 12/27", "payment_card"),
    case("5500 0000 0000 0004", "payment_card"),
    case("card: 5425-2334-3010-9903", "payment_card"),
    case("card 4539.1488.0343.6467", "payment_card"),
    case("card 4539\u20131488\u20130343\u20136467", "payment_card"),
    case("4539/1488/0343/6467", "payment_card"),
    case("amex 3741 549909 51454", "payment_card"),
    case("6011 0046 7400 3286", "payment_card"),
    case("diners 3056 1433 6143 64", "payment_card"),
    case("I lost my card 180068465632122", "payment_card"),  # JCB's older 15 digits from 1800
    case("Maestro 675962527601", "payment_card"),  # twelve digits after a word for a card
    case("Tarjeta: 503829170342", "payment_card"),
    case("カード番号：675962527601", "payment_card"),
    case("123-45-6789", "us_ssn"),
    case("SSN 078-05-1120", "us_ssn"),
    case("my ssn is 219-09-9999.", "us_ssn"),
    case("899-12-3456", "us_ssn"),
    case("SSN 123 45 6789", "us_ssn"),
    case("my SSN is 123456789", "us_ssn"),
    case("Social Security number: 078051120.", "us_ssn"),
    case("GB82 WEST 1234 5698 7654 32", "iban"),
    case("GB82WEST12345698765432", "iban"),
    case("gb82 west 1234 5698 7654 32", "iban"),
    case("IBAN: DE89 3704 0044 0532 0130 00.", "iban"),
    case(
        "wire it to DE89 3704 0044 0532 0130 00 today",
        "iban",
    ),
    case("DE89370400440532013000", "iban"),
    case("FR14 2004 1010 0505 0001 3M02 606", "iban"),
    case("NL91ABNA0417164300", "iban"),
    case("ES91 2100 0418 4502 0005 1332", "iban"),
    case("CH93 0076 2011 6238 5295 7", "iban"),
    case("BE68 5390 0754 7034", "iban"),
    case("IT60 X054 2811 1010 0000 0123 456", "iban"),
    case("ssh to 192.168.1.10", "ip_address"),
    case("server 10.0.0.1:8080 is down", "ip_address"),
    case("8.8.8.8", "ip_address"),
    case("172.16.254.1", "ip_address"),
    case(
        "192.168.100.200",
        "ip_address",
    ),
    case("2001:db9::1", "ip_address"),
    case("fe80::1ff:fe23:4567:890a", "ip_address"),
    case("::1", "ip_address"),
    case("2a02:0cf0:85a3:0000:0000:8a2e:0370:7334", "ip_address"),
    case("listen on [2001:db9::1]:443", "ip_address"),
    case("::ffff:81.2.69.1", "ip_address"),
    case("aws_access_key_id = AKIAQ3EGRTXN7VYKPL5D", "secret"),
    case("token: ghp_R8xq2LmN4vB7kP1sT6wY9zA3cD5eF0gH2jK4", "secret"),
    case("SLACK=xoxb-2048-981273-Qw8eRt5yUi3oPa9sDf2gHj", "secret"),
    case("Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1MSJ9.c2lnbmF0dXJlLXRlc3QtMTIz", "secret"),
    case(
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0t",
        "secret",
    ),
    case("postgres://app:Zq7!rT2v@db.internal:5432/orders", "secret"),
    case("Server=sql01;Database=Pay;User Id=svc;Password=H7kw2Lq9ZpT;", "secret"),
    case('{"api_key": "a8F3kL9qP2xZ7mN4"}', "secret"),
    case("my NI number is AB 12 34 56 C", "national_id"),
    case("Aadhaar 2345 6789 0124", "national_id"),
    case("codice fiscale RSSMRA85T10A562S", "national_id"),
    case("DNI 12345678Z", "national_id"),
    case("NIE X1234567L please", "national_id"),
    case("NIR 1 84 12 75 108 042 31", "national_id"),
    case("SIN: 046 454 286", "national_id"),
    case("BSN 111222333", "national_id"),
    case("passport no. K4829175", "passport"),
    case('{"passport_number": "533248817"}', "passport"),
    case("Passport: GB 512 8837 04", "passport"),
    case("date of birth: 22.08.1995", "date_of_birth"),
    case("DOB 31-Oct-1975", "date_of_birth"),
    case("born on 12 May 1999 in Leeds", "date_of_birth"),
    case('{"birth_date": "1972-12-05"}', "date_of_birth"),
    case("née le 12/04/1990 à Lyon", "date_of_birth"),
    case("deliver to 1600 Pennsylvania Avenue NW, Washington", "street_address"),
    case("my flat is at 221B Baker Street, London", "street_address"),
    case("Return it to 12 Rue de la Paix, 75002 Paris", "street_address"),
    case("Wir wohnen in der Goethestraße 7a, 80336 München", "street_address"),
    case("Ufficio: Via Roma 45, 00184 Roma", "street_address"),
    case("Het kantoor zit op Keizersgracht 123-2 in Amsterdam", "street_address"),
    case('{"line1": "88 Harbour Road", "city": "Cork"}', "street_address"),
    case("Domicilio: c/ del Abedul 5-7, 2º dcha.", "street_address"),
    case("住所：東京都港区芝公園4-2-8", "street_address"),
    case("주소: 서울특별시 강남구 테헤란로 152", "street_address"),
    case("We live at ul. Długa 12 in Gdańsk", "street_address"),
    case("Send it to Váci u. 24. in Budapest", "street_address"),
    case("Meet at Mannerheimintie 5 tomorrow", "street_address"),
    case("Kontor: hersnapvej 18, København", "street_address"),
    case("Harbour View 14 Apt. 3 is mine", "street_address"),
    case("PSC 1234, Box 5678, APO AE 09012", "street_address"),
    case("Доставка: ул. Ленина 5, Москва", "street_address"),
    case("Στο γραφείο, Λεωφόρος Κηφισίας 12", "street_address"),
    case("NHC: 2843742. Episodio: 7734120", "record_number"),
    case("Patient ID 00412877 was admitted", "record_number"),
    case("Kennzeichen: B-MW 1234", "record_number"),
    case("Kundennummer 554213, bitte zurückrufen", "record_number"),
    case("カルテ番号：558812", "record_number"),
    case("my laptop's MAC is 3c:22:fb:9a:41:07", "device_id"),
    case("IMEI 86-012345-678901-4, stolen last week", "device_id"),
    case("Android ID: 9774d56d682e549c", "device_id"),
]

# (text, the detector it nearly looks like): none of the detectors fires.
NEGATIVES = [
    case("4111 1111 1111 1112", "payment_card"),  # Luhn-invalid
    case("order 675962527601 shipped", "payment_card"),  # twelve digits, no word for a card
    case("card 420297299752", "payment_card"),  # twelve digits, no network that has twelve
    case("card 180068465632123", "payment_card"),  # Luhn-invalid
    case("according to 675962527601", "payment_card"),  # "cc" inside a word
    case("order 1234567812345678", "payment_card"),  # Luhn-invalid
    case("5500 0000 0000 0005", "payment_card"),
    case("45391488034364671111", "payment_card"),  # 20 digits
    case("GB83 WEST 1234 5698 7654 32", "iban"),  # wrong check digits
    case("DE88 3704 0044 0532 0130 00", "iban"),
    case("NL91ABNA0417164301", "iban"),
    case("AB12 3456", "iban"),
    case("version 1.2.3.4000", "ip_address"),
    case("1.2.3.4000", "ip_address"),
    case("v1.2.3", "ip_address"),
    case("version 10.0.19041.1234", "ip_address"),
    case("Upgrade to version 2.10.0.4 first", "ip_address"),
    case("release 2.10.0.4", "ip_address"),
    case("pip install foo==v1.2.3.4", "ip_address"),
    case("v2.10.0.4", "ip_address"),
    case("999.1.1.1", "ip_address"),
    case("std::vector<int>", "ip_address"),
    case("Foo::Bar::baz()", "ip_address"),
    case("ratio 16:9", "ip_address"),
    case("2024-05-01", "phone"),
    case("2024/05/01", "phone"),
    case("01.05.2024", "phone"),
    case("from 2024-05-01 to 2024-05-31", "phone"),
    case("2024-05-01T12:30:45Z", "phone"),
    case(
        "2024-05-01 12:30:45",
        "phone",
    ),
    case("12:30:45", "ip_address"),
    case("at 12:30", "phone"),
    case("12:30:45.123", "ip_address"),
    case("open 10:00-12:00", "phone"),
    case("costs 1 200 000 euros", "phone"),
    case("price 1 200 000", "phone"),
    case("1 200 000 000", "phone"),
    case("$1,299.99", "phone"),
    case("1,234,567.89", "phone"),
    case("42", "phone"),
    case("call 555-0100", "phone"),
    case("order #12345", "phone"),
    case("zip 94103", "phone"),
    case("page 12 of 345", "phone"),
    case("ports 8080-8090", "phone"),
    case("1999-2024", "phone"),
    case("ISBN 978-3-16-148410-0", "phone"),
    case("uuid 123e4567-e89b-12d3-a456-426614174000", "phone"),
    case("lat 51.5074, lon -0.1278", "phone"),
    case("000-12-3456", "us_ssn"),
    case("666-12-3456", "us_ssn"),
    case("900-12-3456", "us_ssn"),
    case("999-12-3456", "us_ssn"),
    case("123-00-4567", "us_ssn"),
    case("123-45-0000", "us_ssn"),
    case("123-45-67890", "us_ssn"),
    case("order 123456789 shipped", "us_ssn"),  # nine digits, no word saying SSN
    case("my SSN is 666123456", "us_ssn"),  # never issued
    case("user@localhost", "email"),
    case("ping @jane_doe", "email"),
    case("jane at example dot com", "email"),
    case("foo@bar", "email"),
    case("export OPENAI_API_KEY=sk-your-key-here", "secret"),
    case("password = get_password()", "secret"),
    case("postgres://user:<password>@db/orders", "secret"),
    case("Password=${DB_PASSWORD};", "secret"),
    case("-----BEGIN PRIVATE KEY-----", "secret"),  # a header alone, as in the docs
    case("Authorization: Bearer <your-jwt>", "secret"),
    case("the key is sk_live_...4242 (masked)", "secret"),
    case("key = os.environ['AWS_SECRET_ACCESS_KEY']", "secret"),
    case("Aadhaar numbers look like XXXX XXXX 1234 when masked", "national_id"),
    case("codice fiscale RSSMRA85T10A562T", "national_id"),  # check letter wrong
    case("DNI 12345678A", "national_id"),  # letter wrong
    case("ticket 046 454 286", "national_id"),  # a SIN's shape, not called one
    case("How many blank pages do I need in my passport?", "passport"),
    case("passport renewal takes 10 working days", "passport"),
    case("Schedule the retro for 14 March 2027", "date_of_birth"),
    case("released on 2026-11-20", "date_of_birth"),
    case("When was Marie Curie born?", "date_of_birth"),
    case("Is Oxford Street busy on Saturdays?", "street_address"),
    case("We walked 3 miles along the river", "street_address"),
    case("install it via pip 23 or later", "street_address"),
    case("Route 66 crosses 8 states", "street_address"),
    case("order 722 233 820 shipped", "phone"),  # nine digits, no word for a phone
    case("Tel Aviv 2023 report", "phone"),
    case("Mobil 1 0W-40 oil", "phone"),
    case("api_key: os.getenv('API_KEY')", "secret"),  # code that fetches it, not the key
    case("tax ID is required for 2023 filings 12345", "national_id"),  # prose after the name
    case("order ID: 12345678", "national_id"),  # an ID, but not a person's
    case("CPR 30 compressions 2 breaths 100 per minute", "national_id"),
    case("11010519491231002", "national_id"),  # China's resident ID's shape, bad check
    case("no col 2024 plan", "record_number"),
    case("password = user_password", "secret"),  # a variable's name
    case('Jelszó: os.environ["DB_PASSWORD"]', "secret"),
    case('{"address": "see below"}', "street_address"),
    case("Smith et al. 2019 found it", "street_address"),
    case("Tier 2 Suite offers more", "street_address"),
    case("the apo aa battery", "street_address"),
    case("String 3 of the guitar is out of tune", "street_address"),
    case("Meet in Building 5, Room 3.14", "street_address"),
    case("Web address: https://www.python.org/downloads/release/3", "street_address"),
    case("Server address: db1.internal", "street_address"),
    case("the address is still unknown, see 4 below", "street_address"),
    case("broadcast to ff:ff:ff:ff:ff:ff on the LAN", "device_id"),
    case("IMEI 490154203237517 (a digit off)", "device_id"),
    case("at 12:30:45 the job ran", "device_id"),
    case("order number 123456789 shipped", "record_number"),
    case("Bestellnummer: 554213", "record_number"),
    case("the case number is still unknown", "record_number"),
    case("Ask for your patient ID at the desk", "record_number"),
]


@pytest.mark.parametrize(("text", "expected"), POSITIVES)
def test_realistic_personal_data_fires_exactly_its_detector(text: str, expected: str) -> None:
    assert detect([text], ALL) == [expected]


@pytest.mark.parametrize(("text", "looks_like"), NEGATIVES)
def test_near_misses_fire_no_detector(text: str, looks_like: str) -> None:
    assert detect([text], ALL) == []


def test_the_tables_are_large_and_cover_every_detector() -> None:
    assert len(POSITIVES) >= 40
    assert len(NEGATIVES) >= 40
    assert {p.values[1] for p in POSITIVES} == set(DETECTORS)
    assert {p.values[1] for p in NEGATIVES} == set(DETECTORS)


def test_detectors_are_listed_in_a_fixed_order() -> None:
    assert list(DETECTORS) == [
        "email",
        "phone",
        "payment_card",
        "us_ssn",
        "iban",
        "ip_address",
        "secret",
        "national_id",
        "passport",
        "date_of_birth",
        "street_address",
        "record_number",
        "device_id",
    ]


def test_detect_reports_only_enabled_detectors() -> None:
    text = "jane@exemplo.com paid with 4539 1488 0343 6467 from 10.0.0.1"
    assert detect([text], ["ip_address"]) == ["ip_address"]
    assert detect([text], ["email", "payment_card"]) == ["email", "payment_card"]


def test_detect_with_nothing_enabled_finds_nothing() -> None:
    assert detect(["jane@exemplo.com 123-45-6789"], []) == []


def test_detect_preserves_detector_order_not_enabled_order() -> None:
    text = "10.0.0.1 123-45-6789 jane@exemplo.com 4539 1488 0343 6467"
    enabled = ["ip_address", "us_ssn", "payment_card", "email"]
    assert detect([text], enabled) == ["email", "payment_card", "us_ssn", "ip_address"]


def test_detect_ignores_unknown_detector_names() -> None:
    assert detect(["jane@exemplo.com"], ["passport", "email"]) == ["email"]


def test_detect_fires_when_any_text_matches_and_skips_empty_ones() -> None:
    texts = ["", "hello", "call (415) 555-0100", "", "GB82 WEST 1234 5698 7654 32"]
    assert detect(texts, ALL) == ["phone", "iban"]


def test_detect_accepts_any_iterables() -> None:
    texts = (t for t in ["jane@exemplo.com"])
    assert detect(texts, iter({"email"})) == ["email"]


def test_detect_on_no_texts_finds_nothing() -> None:
    assert detect([], ALL) == []


@pytest.mark.parametrize(
    "digits",
    ["79927398713", "4539148803436467", "5500000000000004", "374154990951454", "0", "18"],
)
def test_luhn_accepts_valid_numbers(digits: str) -> None:
    assert luhn_valid(digits) is True


@pytest.mark.parametrize(
    "digits", ["79927398710", "4111111111111112", "5500000000000005", "1", "19", "12"]
)
def test_luhn_rejects_invalid_numbers(digits: str) -> None:
    assert luhn_valid(digits) is False


def test_luhn_reads_any_decimal_digits() -> None:
    assert luhn_valid("\u0664\u0661\u0661\u0661" + "\uff11" * 11 + "1") is True
    assert luhn_valid("\u0664\u0661\u0661\u0661" + "\uff11" * 11 + "2") is False


@pytest.mark.parametrize(
    "iban",
    [
        "GB82 WEST 1234 5698 7654 32",
        "GB82WEST12345698765432",
        "DE89370400440532013000",
        "FR1420041010050500013M02606",
        "NL91ABNA0417164300",
        "BE68539007547034",
        "NO9386011117947",  # 15 characters, the shortest IBANs
        "MT84MALT011000012345MTLCAST001S",
    ],
)
def test_iban_valid_accepts_real_ibans(iban: str) -> None:
    assert iban_valid(iban) is True


@pytest.mark.parametrize(
    "iban",
    [
        "GB83WEST12345698765432",  # check digits off by one
        "GB82WEST12345698765433",  # last digit changed
        "DE89370400440532013001",
        "GB82WSET12345698765432",  # transposed letters
        "NO938601111794",  # 14 characters: too short
        "GB82" + "1" * 31,  # 35 characters: too long
    ],
)
def test_iban_valid_rejects_wrong_checksums_and_lengths(iban: str) -> None:
    assert iban_valid(iban) is False


# --- the scan limit: text past it is not scanned, and counts as if every detector had fired ---

FILLER = "the quick brown fox jumps over the lazy dog "


def filler(size: int, end: str = "") -> str:
    return (FILLER * (size // len(FILLER) + 1))[: size - len(end)] + end


def test_the_limit_is_a_million_characters() -> None:
    assert SCAN_LIMIT_CHARS == 1_000_000


def test_text_up_to_the_limit_gets_only_real_detections() -> None:
    text = filler(SCAN_LIMIT_CHARS, " jane@exemplo.com")
    assert detect([text], ALL) == ["email"]
    assert scan([text], ALL) == Scan(("email",), (), SCAN_LIMIT_CHARS)


def test_text_past_the_limit_fires_every_enabled_detector() -> None:
    text = filler(SCAN_LIMIT_CHARS + 1)
    assert detect([text], ALL) == list(ALL)
    assert scan([text], ALL) == Scan((), ALL, SCAN_LIMIT_CHARS)


def test_past_the_limit_a_real_detection_is_still_reported_as_one() -> None:
    text = "mail jane@exemplo.com " + filler(SCAN_LIMIT_CHARS)
    found = scan([text], ["email", "iban"])
    assert found == Scan(("email",), ("iban",), SCAN_LIMIT_CHARS)
    assert found.fired == ["email", "iban"]


def test_personal_data_past_the_limit_is_not_looked_for_but_claimed() -> None:
    text = filler(SCAN_LIMIT_CHARS) + " 123-45-6789"
    assert scan([text], ["us_ssn"]) == Scan((), ("us_ssn",), SCAN_LIMIT_CHARS)


def test_past_the_limit_only_enabled_detectors_fire() -> None:
    text = filler(SCAN_LIMIT_CHARS + 1)
    assert detect([text], ["iban", "email", "no_such_detector"]) == ["email", "iban"]
    assert detect([text], []) == []


@pytest.mark.parametrize(
    ("texts", "beyond"),
    [
        (["a" * 10], False),
        (["a" * 11], True),
        (["a" * 4, "", "a" * 6], False),
        (["a" * 4, "a" * 7], True),
        (["a" * 10, ""], False),
        (["a" * 10, "b"], True),
    ],
    ids=[
        "at the limit",
        "one past",
        "across texts",
        "one past across texts",
        "then an empty one",
        "then one more",
    ],
)
def test_the_limit_counts_the_characters_of_all_texts(texts: list[str], beyond: bool) -> None:
    assert scan(texts, ["email"], limit=10).unscanned == (("email",) if beyond else ())


def test_the_part_within_the_limit_of_a_cut_text_is_scanned() -> None:
    found = scan(["hello", "mail jane@exemplo.com" + "x" * 20], ["email", "iban"], limit=30)
    assert found == Scan(("email",), ("iban",), 30)


# --- many texts scanned as one --------------------------------------------------------------

_PIECES = st.text(alphabet="0123456789 .-+()@:abcAB\n", max_size=24)


@settings(deadline=None, max_examples=300)
@given(texts=st.lists(_PIECES, max_size=6))
def test_scanning_texts_together_finds_exactly_what_each_text_shows(texts: list[str]) -> None:
    """The texts of a request are scanned as one, joined by a separator no pattern takes: a
    detection is never made of the end of one text and the start of the next, and never lost."""
    for name, finds in DETECTORS.items():
        assert (name in detect(texts, [name])) == any(finds(text) for text in texts if text)


def test_a_number_split_across_two_fields_is_not_joined() -> None:
    assert detect(["call 415-555", "-0100 now"], ALL) == []
    assert detect(["4111 1111", "1111 1111"], ALL) == []


def test_a_detector_that_fails_counts_as_one_that_found_something(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(text: str) -> bool:
        raise RuntimeError("a bug in a detector")

    monkeypatch.setitem(DETECTORS, "email", broken)
    assert detect(["nothing personal here"], ["email", "phone"]) == ["email"]
