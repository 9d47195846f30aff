"""policies/spelled.py: spelled-out addresses and digits come back as "@", "." and digits; prose
that only looks like them stays None (that the work is linear in the text is
bench/privacy_worst_case.py's to show: the "spelled-out reading" rows).

The generated cases take their values from faker (fixed seeds) and spell digits with num2words
(test-only), so the module's own table is checked against another source, not against itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from policies.spelled import DIGIT_WORDS, LIMIT_CHARS, respelled

faker = pytest.importorskip("faker")
num2words = pytest.importorskip("num2words").num2words

# --- e-mail addresses ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("jsmith at gmail dot com", "jsmith@gmail.com"),
        ("Write to jsmith [at] corp [dot] de today.", "Write to jsmith@corp.de today."),
        ("j.smith(at)firma(punkt)de", "j.smith@firma.de"),
        ("jsmith arroba gmail punto com", "jsmith@gmail.com"),
        ("jsmith собака mail точка ru", "jsmith@mail.ru"),
        ("JSmith AT Gmail DOT Com", "JSmith@Gmail.Com"),
        ("jsmith {at} mail (dot) corp [.] de", "jsmith@mail.corp.de"),
        ("jsmith at mail.corp dot de", "jsmith@mail.corp.de"),
        ("jsmith [at] gmail.com", "jsmith@gmail.com"),  # a bracketed at may take a literal dot
        ("jsmith @ gmail . com", "jsmith@gmail.com"),
        ("jsmith klammeraffe firma punkt de", "jsmith@firma.de"),
        ("m.rossi chiocciola posta punto it", "m.rossi@posta.it"),
        ("jsmith snabel-a foretag punkt se", "jsmith@foretag.se"),
        ("kowalski małpa poczta kropka pl", "kowalski@poczta.pl"),
        ("jsmith艾特gmail点com", "jsmith@gmail.com"),
        ("jsmith アットマーク gmail ドット com", "jsmith@gmail.com"),
        ("jsmith골뱅이naver닷com", "jsmith@naver.com"),
        ("john dot smith at gmail dot com", "john.smith@gmail.com"),
        (
            "reach me at john dot smith at gmail dot com please",
            "reach me at john.smith@gmail.com please",
        ),
        ("jsmith at gmail dot com at noon", "jsmith@gmail.com at noon"),
        ("jsmith at mail dot co dot uk.", "jsmith@mail.co.uk."),
        ("a at b dot org, c [at] d [dot] net", "a@b.org, c@d.net"),
    ],
)
def test_spelled_addresses(text: str, expected: str | None) -> None:
    assert respelled(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "meet at noon",
        "look at this dot",
        "Let's meet at the café at noon, then at the station.",
        "jsmith at gmail.com",  # a bare at before a literal dot: "look at example.com" is prose
        "Look at example.com for details.",
        "I arrived at 5. Then we left at 6.",
        "The point is that at dot level, at least, it works.",
        "See you at the office dot",
        "at dot com",  # no local part
        "jsmith at gmail dot c",  # a one-letter TLD
        "jsmith at gmail dot c0m",
        "write to jsmith@example.com",  # already an address: nothing is spelled
        "x @ noon",
        "a (at) b",
        "",
    ],
)
def test_prose_near_misses_stay_none(text: str) -> None:
    assert respelled(text) is None


STYLES = [
    (" at ", " dot "),
    (" AT ", " DOT "),
    (" [at] ", " [dot] "),
    ("(at)", "(punkt)"),
    (" {at} ", " (.) "),
    (" @ ", "."),
    (" arroba ", " punto "),
    (" arobase ", " point "),
    (" собака ", " точка "),
    (" chiocciola ", " punto "),
    ("艾特", "点"),
]
MAIL_LOCALES = ["en_US", "de_DE", "fr_FR", "es_ES", "ru_RU", "ja_JP", "th_TH", "sk_SK", "vi_VN"]


@pytest.mark.parametrize("locale", MAIL_LOCALES)
def test_generated_addresses_come_back(locale: str) -> None:
    fake = faker.Faker(locale)
    fake.seed_instance(20260)
    for index in range(60):
        address = [fake.email, fake.company_email, fake.free_email][index % 3]()
        at, dot = STYLES[index % len(STYLES)]
        local, domain = address.split("@")
        spelled = local.replace(".", dot) + at + domain.replace(".", dot)
        out = respelled(f"Write to {spelled} today.")
        assert out is not None, spelled
        assert address in out, (spelled, out)


# --- digits ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("five five five, one two three, four five six seven", "555 123 4567"),
        ("Call five five five one two three four.", "Call 5551234."),
        ("null eins sieben neun, acht acht", "0179 88"),
        ("zwo drei vier fünf", "2345"),
        ("Tel. cero seis, uno dos tres", "Tel. 06 123"),
        ("ноль девять один два три", "09123"),
        ("п'ять дев’ять нуль сім", "5907"),
        ("ΜΗΔΕΝ ΕΞΙ ΕΝΑ ΔΥΟ", "0612"),
        ("İKİ SIFIR BİR ÜÇ", "2013"),
        ("funf sechs sieben acht", "5678"),  # typed without the umlaut
        ("शून्य नौ आठ सात", "0987"),
        ("صفر خمسة خمسة واحد", "0551"),
        ("אפס חמש שתיים שלוש", "0523"),
        ("double five double five", "5555"),
        ("triple zero one", "0001"),
        ("oh two oh, seven nine four six", "oh 20 7946"),  # "oh" is zero inside a run only
        ("Oh, one two three four", "Oh, 1234"),
        ("one two three four double", "1234 double"),
        ("five-five-five-one-two-three-four", "5551234"),
        ("one two three four\nfive six", "1234\nfive six"),  # a line break ends a run
        ("零九〇一二三四五六七八", "09012345678"),
        ("电话〇九〇-一二三四-五六七八", "电话090 1234 5678"),
        ("二〇二六年", "2026年"),
        ("공일공 일이삼사 오육칠팔", "010 1234 5678"),
        ("공 일 공 일 이", "01012"),  # one digit a word: one number
        ("전화 공이-일이삼사-오육칠팔 입니다", "전화 02 1234 5678 입니다"),
    ],
)
def test_spelled_digits(text: str, expected: str) -> None:
    assert respelled(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "one two three",  # three digits
        "one two drei vier",  # two languages, two digits each
        "one or two, three and four",
        "I have one, then two; three...",
        "We need to fire the cannon at one o'clock.",
        "Oh one two three",
        "double double",
        "一二三",
        "一石二鳥、三日坊主",
        "一二 三四",  # groups of two characters are words
        "이 일이 사실이라면",  # "this work, if true": whole words only
        "이 일이 사이",
        "공일공-일이삼사-오육칠팔로",  # a particle on the last group: not rewritten
        "555 123 4567",
    ],
)
def test_digit_near_misses_stay_none(text: str) -> None:
    assert respelled(text) is None


def _spell_words(groups: list[str], word: Callable[[int], str]) -> str:
    return ", ".join(" ".join(word(int(digit)) for digit in group) for group in groups)


def _spell_chars(groups: list[str], word: Callable[[int], str]) -> str:
    return "-".join("".join(word(int(digit)) for digit in group) for group in groups)


# faker locale -> num2words language; Japanese and Korean are written without spaces
PHONE_LOCALES = {
    **dict.fromkeys(["en_US", "en_GB"], "en"),
    **{loc: loc[:2] for loc in "de_DE fr_FR es_ES it_IT nl_NL sv_SE da_DK fi_FI".split()},
    **{loc: loc[:2] for loc in "tr_TR ru_RU uk_UA pl_PL cs_CZ sk_SK sl_SI ro_RO".split()},
    **{loc: loc[:2] for loc in "hu_HU lt_LT lv_LV id_ID vi_VN th_TH he_IL fa_IR ja_JP".split()},
    **{"pt_BR": "pt", "pt_PT": "pt", "no_NO": "no", "ar_AA": "ar", "es_CA": "ca", "ko_KR": "ko"},
    **{"el_GR": "el", "hi_IN": "hi", "zh_CN": "zh", "bg_BG": "bg"},
}
# languages num2words does not have, written here apart from the module's table
OTHERS = {
    "el": "μηδέν ένα δύο τρία τέσσερα πέντε έξι επτά οκτώ εννέα".split(),
    "hi": "शून्य एक दो तीन चार पांच छह सात आठ नौ".split(),
    "zh": list("零一二三四五六七八九"),
    "bg": "нула едно две три четири пет шест седем осем девет".split(),
}


@pytest.mark.parametrize(("locale", "lang"), sorted(PHONE_LOCALES.items()))
def test_generated_phone_and_id_numbers_come_back(locale: str, lang: str) -> None:
    fake = faker.Faker(locale)
    fake.seed_instance(31337)
    if lang in OTHERS:
        digits = OTHERS[lang]
        word: Callable[[int], str] = digits.__getitem__
    else:
        word = lambda digit: num2words(digit, lang=lang)  # noqa: E731
    spell = _spell_chars if lang in ("ja", "ko", "zh") else _spell_words
    values = [fake.phone_number() for _ in range(12)] + [fake.ssn() for _ in range(3)]
    for value in values:
        groups = re.findall(r"\d+", value)
        out = respelled(f"Tel: {spell(groups, word)}.")
        assert out is not None, value
        assert " ".join(groups) in out, (value, out)


# --- the table ---------------------------------------------------------------------------------


def test_the_table_has_ten_digits_a_language_and_agrees_with_num2words() -> None:
    for lang, row in DIGIT_WORDS.items():
        slots = [slot.split("|") for slot in row.split(" ")]
        assert len(slots) == 10, lang
        if lang in ("el", "hi", "zh", "bg"):
            continue
        for digit, variants in enumerate(slots):
            assert num2words(digit, lang=lang).lower() in variants, (lang, digit)


def test_no_word_is_two_different_digits() -> None:
    digit_of: dict[str, int] = {}
    for row in DIGIT_WORDS.values():
        for digit, slot in enumerate(row.split(" ")):
            for word in slot.split("|"):
                assert digit_of.setdefault(word, digit) == digit, word


# --- ordinary text, long text ------------------------------------------------------------------


@pytest.mark.parametrize(
    "locale", ["en_US", "de_DE", "fr_FR", "es_ES", "ru_RU", "ja_JP", "zh_CN", "ko_KR", "ar_AA"]
)
def test_ordinary_text_is_none(locale: str) -> None:
    fake = faker.Faker(locale)
    fake.seed_instance(7)
    text = " ".join(fake.text(1000) for _ in range(30))
    assert respelled(text) is None


def test_text_past_the_limit_is_left_out() -> None:
    assert respelled("x" * LIMIT_CHARS + " one two three four") is None
    out = respelled("one two three four " + "x" * LIMIT_CHARS)
    assert out is not None
    assert out.startswith("1234 x")
    assert len(out) <= LIMIT_CHARS
