"""Detectors of account and identity numbers with a fixed shape (pure): payment cards (Luhn, a
card network's first digit), IBANs (an IBAN country, mod-97) and US SSNs (never-issued ranges
excluded; nine bare digits only after a word that names them). Checksums keep order numbers,
creditor references and version strings from being taken for them.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain

from policies.re2text import blank, compile_unicode, digits_of, spans
from policies.reserved import test_card

# Groups separated by spaces and hyphens; and, looked for apart (so a dot never lengthens a
# candidate the first pattern finds), by dashes, dots or slashes (NFKC has made a no-break space
# a space already). Luhn decides.
CARD = compile_unicode(r"(?:^|[^\d])((?:\d[ -]?){12,18}\d)(?:[^\d]|$)")
_CARD_OTHER = compile_unicode(r"(?:^|[^\d])((?:\d[ \x{2010}-\x{2015}./]?){12,18}\d)(?:[^\d]|$)")
_TWELVE = compile_unicode(r"(?:^|[^\d])((?:\d[ -]?){11}\d)(?:[^\d]|$)")
# A payment card in the languages most written (lower case; Cyrillic and Greek stems): looked
# for in the bytes before twelve digits, which are a card's only after such a word.
_CARD_WORDS = (
    b" cc ",
    *(
        word.encode()
        for word in (
            "card carte tarjeta karte cartão cartao carta kaart kort karta kart kartu thẻ "
            "maestro cc# cc: карт κάρτ כרטיס بطاقة کارت कार्ड บัตร カード 卡 카드"
        ).split()
    ),
)
# Never issued: area 000, 666 or 900-999, group 00, serial 0000. [^\D0] is a digit but 0.
_SSN = compile_unicode(
    r"(?:^|[^\d])("
    r"(?:0(?:[^\D0]\d|0[^\D0])|6(?:[^\D6]\d|6[^\D6])|[^\D069]\d\d)"
    r"[- ](?:[^\D0]\d|0[^\D0])"
    r"[- ](?:[^\D0]\d{3}|0[^\D0]\d\d|00[^\D0]\d|000[^\D0]))"
    r"(?:[^\w-]|$)"  # not a reference number's "-B"
)
# Nine digits in a row are an SSN only where the text says so just before (an order or account
# number has the same shape): the context words, looked for in the 40 bytes before.
_SSN_BARE = compile_unicode(r"(?:^|[^\d])(\d{9})(?:[^\d]|$)")
_SSN_CONTEXT = (b"ssn", b"social security", b"social-security", b"ss#", b"ss no")
IBAN = compile_unicode(r"(?:^|[^\w])([A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30})")

_DOUBLED = str.maketrans("0123456789", "0246813579")


def luhn_valid(digits: str) -> bool:
    # From the right, every second digit is doubled and the digits of that added: 0246813579.
    if not digits.isascii():
        digits = "".join(str(int(char)) for char in digits)
    doubled = digits[-2::-2].translate(_DOUBLED)
    return (sum(map(int, digits[-1::-2])) + sum(map(int, doubled))) % 10 == 0


def iban_valid(candidate: str) -> bool:
    compact = candidate.replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    rearranged = compact[4:] + compact[:4]
    number = "".join(str(int(char, 36)) for char in rearranged)
    return int(number) % 97 == 1


def _starts_with_iban(compact: str) -> bool:
    """Whether a prefix of 15 to 34 characters is a valid IBAN (the pattern also takes the words
    after one): iban_valid of every length, in one pass extending a mod-97 remainder."""
    if not compact[2:4].isdecimal():  # a digit RE2's Unicode tables know and Python's do not
        return False
    moved = "".join(str(int(char, 36)) for char in compact[:4])  # goes after the rest
    shift, tail = 10 ** len(moved), int(moved)
    remainder = 0
    for length, char in enumerate(compact[4:34], start=5):
        value = int(char, 36)
        remainder = (remainder * (100 if value > 9 else 10) + value) % 97
        if length >= 15 and (remainder * shift + tail) % 97 == 1:
            return True
    return False


def cards(data: bytes) -> Iterator[tuple[int, int]]:
    data = blank(IBAN, data.upper(), lambda match: match[:2] in IBAN_SHAPED)
    others = (s for s in spans(_CARD_OTHER, data) if _one_separator(data[s[0] : s[1]]))
    named = (s for s in spans(_TWELVE, data) if _card_named(data, s[0]))
    return (
        s
        for s in chain(spans(CARD, data), others, named)
        if is_card(data[s[0] : s[1]]) and not test_card(digits_of(data[s[0] : s[1]]))
    )


def is_card(candidate: bytes) -> bool:
    """The Luhn check, and a card network's length and first digit: 13 to 19 digits from 2-6
    (Mastercard, Visa, Amex, Diners, JCB, Discover, UnionPay); 15 from 1 (UATP, and JCB's
    older "1800"); 12 from 5 or 6 (Maestro, which cards() takes only after a word for a card:
    twelve digits are as often an order or a phone number)."""
    digits = digits_of(candidate)
    first, length = int(digits[0]), len(digits)
    network = (
        (13 <= length <= 19 and 2 <= first <= 6)
        or (length == 15 and first == 1)
        or (length == 12 and first in (5, 6))
    )
    return network and luhn_valid(digits)


def _card_named(data: bytes, start: int) -> bool:
    """Whether a word for a payment card is written in the 40 bytes before `start`."""
    before = data[max(0, start - 40) : start].lower()
    return any(word in before for word in _CARD_WORDS)


def _one_separator(candidate: bytes) -> bool:
    """Printed cards use one kind of separator (spaces aside): "4111.1111.1111.1111", not an
    IP address run into another number ("0958192.168.1.10")."""
    return len({c for c in candidate.decode() if not c.isdecimal() and c != " "}) <= 1


def ssns(data: bytes) -> Iterator[tuple[int, int]]:
    yield from spans(_SSN, data)
    for start, end in spans(_SSN_BARE, data):
        before = data[max(0, start - 40) : start].lower()
        if _issued(digits_of(data[start:end])) and any(word in before for word in _SSN_CONTEXT):
            yield start, end


def _issued(digits: str) -> bool:
    """Could be an SSN: area not 000, 666 or 900-999; group not 00; serial not 0000."""
    area, group, serial = digits[:3], digits[3:5], digits[5:]
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"


def ibans(data: bytes) -> Iterator[tuple[int, int]]:
    upper = data.upper()
    return (s for s in spans(IBAN, upper) if _is_iban(upper[s[0] : s[1]].replace(b" ", b"")))


def _is_iban(compact: bytes) -> bool:
    """A country that issues IBANs (an ISO 11649 creditor reference, "RF18 ...", passes the same
    checksum) and the mod-97 check."""
    return compact[:2] in IBAN_COUNTRIES and _starts_with_iban(compact.decode())


# The IBAN registry's countries, and those that use IBANs without being in it.
IBAN_COUNTRIES = frozenset(
    code.encode()
    for code in (
        "AD AE AL AT AZ BA BE BG BH BI BR BY CH CR CY CZ DE DJ DK DO EE EG ES FI FK FO FR GB GE "
        "GI GL GR GT HN HR HU IE IL IQ IS IT JO KW KZ LB LC LI LT LU LV LY MC MD ME MK MN MR MT "
        "MU NI NL NO OM PK PL PS PT QA RO RS RU SA SC SD SE SI SK SM SO ST SV TL TN TR UA VA VG "
        "XK YE DZ AO BJ BF CM CV CF TD KM CG CI GA GQ GW IR MA MG ML MZ NE SN TG"
    ).split()
)
IBAN_SHAPED = IBAN_COUNTRIES | {b"RF"}  # and creditor references: neither cards nor phones
