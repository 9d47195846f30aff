"""Built-in detectors of personal data in request text (pure).

Each detector finds candidates with a pattern and confirms them where a checksum exists (Luhn
for payment cards, mod-97 for IBANs, a real address for IPs), so order numbers and version
strings are not taken for cards and addresses. Detection can only make a request stricter.

This runs on every request, on the event loop, over text a client chose, so every step is linear
in the text: the patterns run on RE2 (no backtracking; its matching also releases the GIL), and
each Python loop over candidates resumes where the last one ended. RE2 has no lookaround, so a
pattern spells a lookbehind as a character it consumes before the candidate (or the start of the
text), a lookahead as one it consumes after, and the next search starts again where the
candidate itself ended: the character after one candidate can still be the one before the next.
Matches are then exactly those the lookaround patterns found, without their quadratic backtracking
on a long run of a character they accept.

A request is scanned up to SCAN_LIMIT_CHARS characters in all. Past that, the rest is not
scanned and every enabled detector counts as fired: a request cannot slip past the detectors,
to a cloud its privacy level would forbid, by being long.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from typing import Protocol

import re2  # type: ignore[import-untyped]

from policies import identifiers, secrets

log = logging.getLogger("overspill")

SCAN_LIMIT_CHARS = 1_000_000
SEPARATOR = "\x00"  # between the texts of one request, scanned as one

# Python's \d, \D, \w and \s are Unicode-aware, RE2's are ASCII; these keep Python's meaning (from
# RE2's Unicode tables, which may be a version ahead of Python's). \w and \s only inside [...].
_DIGIT = r"\p{Nd}"
_NOT_DIGIT = r"\P{Nd}"
_WORD = r"\p{L}\p{N}_"
_SPACE = (
    r"\t-\r\x{1c}-\x{20}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}"
    r"\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}"
)


class _Match(Protocol):
    def span(self, group: int = ...) -> tuple[int, int]: ...


class _Pattern(Protocol):
    @property
    def groups(self) -> int: ...

    def search(self, text: bytes, pos: int = ...) -> _Match | None: ...


def _compile(pattern: str) -> _Pattern:
    r"""A pattern written with Python's \d, \D, \w and \s, for RE2, with their meaning."""
    unicode = pattern.replace(r"\d", _DIGIT).replace(r"\D", _NOT_DIGIT)
    unicode = unicode.replace(r"\w", _WORD).replace(r"\s", _SPACE)
    compiled: _Pattern = re2.compile(unicode)
    return compiled


_EMAIL = _compile(r"([A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,})")
_PHONE = _compile(
    r"(?:^|[^\w.+-])("  # not a part of an identifier ("INV-2026-000184")
    r"\+\d{1,3}[\s.-]?(?:\(\d{1,4}\)[\s.-]?)?\d{1,5}(?:[\s.-]\d{2,8}){1,4}"  # +CC with groups
    r"|(?:\(\d{1,4}\)[\s.-]?)?"  # national: an area code in brackets, or not
    r"(?:\d{2,5}[\s.-]\d{6,8}"  # 0151 23456789
    r"|(?:\d[.-]|\d{2,5}[\s.-])\d{2,4}(?:[\s.-]\d{2,4}){0,3})"  # 1-800-555-0199, 020 7946 0958
    r"|\+\d{9,15}"  # E.164 without separators
    # After it: not a word character; a full stop or hyphen only before a non-word (a sentence's
    # end, yes; a serial number's "-A", no).
    r")(?:[^\w.-]|[.-](?:[^\w]|$)|$)"
)
# Digit groups that are not phone numbers (dates, times, IPv4), removed before looking for one.
_NOT_PHONES = _compile(
    r"(\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2})?)?|\d{1,2}:\d{2}(?::\d{2})?)"
    r"|(?:^|[^\d.])((?:\d{1,3}\.){3}\d{1,3})(?:[^\d.]|$)"
)
# Groups separated by spaces and hyphens; and, looked for apart (so a dot never lengthens a
# candidate the first pattern finds), by dashes, dots or slashes (NFKC has made a no-break space
# a space already). Luhn decides.
_CARD = _compile(r"(?:^|[^\d])((?:\d[ -]?){12,18}\d)(?:[^\d]|$)")
_CARD_OTHER = _compile(r"(?:^|[^\d])((?:\d[ \x{2010}-\x{2015}./]?){12,18}\d)(?:[^\d]|$)")
# Never issued: area 000, 666 or 900-999, group 00, serial 0000. [^\D0] is a digit but 0.
_SSN = _compile(
    r"(?:^|[^\d])"
    r"(?:0(?:[^\D0]\d|0[^\D0])|6(?:[^\D6]\d|6[^\D6])|[^\D069]\d\d)"
    r"[- ](?:[^\D0]\d|0[^\D0])"
    r"[- ](?:[^\D0]\d{3}|0[^\D0]\d\d|00[^\D0]\d|000[^\D0])"
    r"(?:[^\w-]|$)"  # not a reference number's "-B"
)
# Nine digits in a row are an SSN only where the text says so just before (an order or account
# number has the same shape): the context words, looked for in the 40 bytes before.
_SSN_BARE = _compile(r"(?:^|[^\d])(\d{9})(?:[^\d]|$)")
_SSN_CONTEXT = (b"ssn", b"social security", b"social-security", b"ss#", b"ss no")
_IBAN = _compile(r"(?:^|[^\w])([A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30})")
# Only the shapes ipaddress accepts (octets 0-255 without leading zeros; eight groups, or fewer
# around one "::", with at most 7 colons as the lookaround pattern allowed), so a run of
# near-misses costs no Python; ipaddress still has the last word.
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])"
_IPV4 = _compile(rf"(?:^|[^\d.])((?:{_OCTET}\.){{3}}{_OCTET})(?:[^\d.]|$)")
_HEX = r"[0-9A-Fa-f]{1,4}"
_IPV6_FORMS = (
    rf"(?:{_HEX}:){{7}}{_HEX}",  # eight groups
    rf"(?:{_HEX}:){{1,6}}:",  # n groups, then ::
    *(rf"(?:{_HEX}:){{1,{7 - n}}}(?::{_HEX}){{1,{n}}}" for n in range(1, 7)),  # a::b, a + b <= 7
    rf":(?:(?::{_HEX}){{1,6}}|:)",  # :: then n groups, or :: alone
)
_IPV6 = _compile(rf"(?:^|[^\w:])({'|'.join(_IPV6_FORMS)})(?:[^\w:]|$)")

_DOUBLED = str.maketrans("0123456789", "0246813579")
_ASCII_NON_DIGITS = bytes(byte for byte in range(128) if not 0x30 <= byte <= 0x39)


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


def _bytes(text: str) -> bytes:
    # A lone surrogate (JSON allows "\ud800") is not UTF-8: "?" stands in, a character no
    # pattern takes either.
    return text.encode("utf-8", "replace")


def _spans(pattern: _Pattern, data: bytes) -> Iterator[tuple[int, int]]:
    """Where the candidates are (the first group that took part), left to right, not overlapping.
    Each search starts where the last candidate ended: linear in `data` in all."""
    groups = range(1, pattern.groups + 1)
    pos = 0
    while (found := pattern.search(data, pos)) is not None:
        start, pos = next(span for group in groups if (span := found.span(group))[0] >= 0)
        yield start, pos


def _candidates(pattern: _Pattern, data: bytes) -> Iterator[bytes]:
    return (data[start:end] for start, end in _spans(pattern, data))


def _blank(
    pattern: _Pattern, data: bytes, only: Callable[[bytes], bool] = lambda candidate: True
) -> bytes:
    """`data` with each candidate (that `only` accepts) replaced by a space."""
    pieces: list[bytes] = []
    end = 0
    for start, stop in _spans(pattern, data):
        if not only(data[start:stop]):
            continue
        pieces += (data[end:start], b" ")
        end = stop
    pieces.append(data[end:])
    return b"".join(pieces)


def _digits(candidate: bytes) -> str:
    if candidate.isascii():
        return candidate.translate(None, _ASCII_NON_DIGITS).decode()
    return "".join(filter(str.isdecimal, candidate.decode()))


def _email(text: str) -> bool:
    data = _bytes(text)
    return any(not _in_url_authority(data, start) for start, _ in _spans(_EMAIL, data))


def _in_url_authority(data: bytes, start: int) -> bool:
    """user:password@host in a URL is a credential (the secret detector's), not an address: a
    "://" earlier in the same word (looked for in the 256 bytes before, so the scan stays
    linear)."""
    before = data[max(0, start - 256) : start]
    word = before.rsplit(None, 1)[-1] if before.strip() else b""
    return b"://" in word and b":" in word.split(b"://", 1)[1]


def _phone(text: str) -> bool:
    # Card numbers, IBANs, dates, times and IP addresses are digit groups too, but not phones:
    # the real ones are removed first (a number only shaped like a card may still be a phone).
    data = _blank(_CARD, _bytes(text), _is_card)
    data = _blank(_IBAN, data.upper(), lambda match: match[:2] in _IBAN_SHAPED)
    data = _blank(_NOT_PHONES, data)
    for pattern, valid in identifiers.CHECKED_NUMBERS:  # an Aadhaar or NIR checks out: not a phone
        data = _blank(pattern, data, functools.partial(_checks_out, valid))
    return any(10 <= len(_digits(match)) <= 15 for match in _candidates(_PHONE, data))


def _checks_out(valid: Callable[[str], bool], candidate: bytes) -> bool:
    return valid(identifiers.compact(candidate))


def _card(text: str) -> bool:
    data = _blank(_IBAN, _bytes(text).upper(), lambda match: match[:2] in _IBAN_SHAPED)
    others = (c for c in _candidates(_CARD_OTHER, data) if _one_separator(c))
    return any(_is_card(match) for match in chain(_candidates(_CARD, data), others))


def _is_card(candidate: bytes) -> bool:
    """13 to 19 digits, a card network's first digit (2-6: Mastercard, Visa, Amex, Diners,
    JCB, Discover, UnionPay), and the Luhn check."""
    digits = _digits(candidate)
    return 13 <= len(digits) <= 19 and 2 <= int(digits[0]) <= 6 and luhn_valid(digits)


def _one_separator(candidate: bytes) -> bool:
    """Printed cards use one kind of separator (spaces aside): "4111.1111.1111.1111", not an
    IP address run into another number ("0958192.168.1.10")."""
    return len({c for c in candidate.decode() if not c.isdecimal() and c != " "}) <= 1


def _ssn(text: str) -> bool:
    data = _bytes(text)
    if _SSN.search(data) is not None:
        return True
    for start, end in _spans(_SSN_BARE, data):
        before = data[max(0, start - 40) : start].lower()
        if _issued(_digits(data[start:end])) and any(word in before for word in _SSN_CONTEXT):
            return True
    return False


def _issued(digits: str) -> bool:
    """Could be an SSN: area not 000, 666 or 900-999; group not 00; serial not 0000."""
    area, group, serial = digits[:3], digits[3:5], digits[5:]
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"


def _iban(text: str) -> bool:
    matches = _candidates(_IBAN, _bytes(text.upper()))
    return any(_is_iban(match.replace(b" ", b"")) for match in matches)


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
_IBAN_SHAPED = IBAN_COUNTRIES | {b"RF"}  # and creditor references: neither cards nor phones


def _ip(text: str) -> bool:
    data = _bytes(text)
    v4 = ((s, e) for s, e in _spans(_IPV4, data) if not _versioned(data[max(0, s - 24) : s]))
    for start, end in chain(v4, _spans(_IPV6, data)):
        try:
            ipaddress.ip_address(data[start:end].decode())
        except ValueError:
            continue
        return True
    return False


def _versioned(before: bytes) -> bool:
    """A dotted quad just after a word that announces a version ("version 2.10.0.4", "v2.10.0.4",
    "release 1.2.3.4") is a version number, not an address."""
    stripped = (word.strip(b"\"'{}[](),;:=#\x00") for word in before.lower().split())
    words = [word for word in stripped if word]
    if any(b"version" in word for word in words[-2:]):  # __version__ = "...", client_version
        return True
    if len(words) >= 2 and words[-2] in _VERSION_WORDS:  # "upgrading to 2.10.0.4"
        return True
    last = words[-1] if words else b""
    if last.endswith(b"v"):  # "v1.2.3.4", "==v1.2.3.4", "versionv"... but not "dev1.2.3.4"
        stem = last[:-1]
        return not stem[-1:].isalnum() or stem in _VERSION_WORDS
    return last in _VERSION_WORDS


_VERSION_WORDS = frozenset(
    {b"version", b"versions", b"ver", b"ver.", b"release", b"build", b"firmware", b"patch"}
    | {b"update", b"upgrade", b"downgrade", b"tag", b"updating", b"upgrading", b"updated"}
    | {b"upgraded", b"installed", b"latest", b"current", b"released"}
)


DETECTORS: dict[str, Callable[[str], bool]] = {
    "email": _email,
    "phone": _phone,
    "payment_card": _card,
    "us_ssn": _ssn,
    "iban": _iban,
    "ip_address": _ip,
    "secret": secrets.found,
    "national_id": identifiers.national_id,
    "passport": identifiers.passport,
    "date_of_birth": identifiers.date_of_birth,
}


@dataclass(frozen=True)
class Scan:
    """What the enabled detectors say about a request's texts, in DETECTORS order."""

    detected: tuple[str, ...]  # fired on the text scanned
    unscanned: tuple[str, ...]  # the others, when text went past the limit: they count as fired
    limit: int

    @property
    def fired(self) -> list[str]:
        return [name for name in DETECTORS if name in self.detected or name in self.unscanned]


def scan(texts: Iterable[str], enabled: Iterable[str], limit: int = SCAN_LIMIT_CHARS) -> Scan:
    """Run the enabled detectors over the first `limit` characters of `texts` (empty ones
    skipped); when there were more, every enabled detector that did not fire is `unscanned`."""
    wanted = set(enabled)
    names = [name for name in DETECTORS if name in wanted]
    scanned, beyond = _within(texts, limit) if names else ([], False)
    # One search per detector over all the texts: a body of a million one-letter strings must
    # not cost a million calls each. No pattern takes the separator, and every boundary does.
    joined = SEPARATOR.join(scanned)
    detected = tuple(name for name in names if joined and fires(name, joined))
    unscanned = tuple(name for name in names if name not in detected) if beyond else ()
    return Scan(detected, unscanned, limit)


def fires(name: str, text: str) -> bool:
    """Fail closed: a detector that fails counts as one that found something (the request is
    kept from where a detection would forbid it, never sent unchecked)."""
    try:
        return DETECTORS[name](text)
    except Exception:
        log.exception("detector %s failed: counted as a detection", name)
        return True


def detect(
    texts: Iterable[str], enabled: Iterable[str], limit: int = SCAN_LIMIT_CHARS
) -> list[str]:
    """Names of the enabled detectors that fire on any of `texts`, in DETECTORS order; all of them
    when the texts are longer than `limit` characters in all."""
    return scan(texts, enabled, limit).fired


def _within(texts: Iterable[str], limit: int) -> tuple[list[str], bool]:
    """The non-empty texts, cut off after `limit` characters in all; and whether any was cut."""
    kept: list[str] = []
    room = limit
    for text in texts:
        if len(text) > room:
            return [*kept, text[:room]] if room else kept, True
        if text:
            kept.append(text)
            room -= len(text)
    return kept, False
