"""Built-in detectors of personal data in request text (pure).

Each detector finds candidates with a pattern and confirms them where a checksum exists (Luhn
for payment cards, mod-97 for IBANs, a real address for IPs), so order numbers and version
strings are not taken for cards and addresses. Detection can only make a request stricter.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable

_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
_PHONE = re.compile(
    r"(?<![\w.+])(?:"
    r"\+\d{1,3}[\s.-]?(?:\(\d{1,4}\)[\s.-]?)?\d{1,5}(?:[\s.-]\d{2,6}){1,4}"  # +CC with groups
    r"|(?:\(\d{1,4}\)[\s.-]?)?\d{2,4}(?:[\s.-]\d{2,4}){1,4}"  # national, grouped
    r"|\+\d{9,15}"  # E.164 without separators
    r")(?![\w.])"
)
# Digit groups that are not phone numbers, removed before looking for one.
_NOT_PHONES = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2})?)?|\d{1,2}:\d{2}(?::\d{2})?"
    r"|(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])"
)
_CARD = re.compile(r"(?<!\d)(?:\d[ -]?){12,18}\d(?!\d)")
_SSN = re.compile(r"(?<!\d)(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?!\d)")
_IBAN_START = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}")
_IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])")
_IPV6 = re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])")


def luhn_valid(digits: str) -> bool:
    total = 0
    for i, char in enumerate(reversed(digits)):
        value = int(char)
        if i % 2 == 1:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def iban_valid(candidate: str) -> bool:
    compact = candidate.replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    rearranged = compact[4:] + compact[:4]
    number = "".join(str(int(char, 36)) for char in rearranged)
    return int(number) % 97 == 1


def _email(text: str) -> bool:
    return _EMAIL.search(text) is not None


def _phone(text: str) -> bool:
    # Card numbers, IBANs, dates, times and IP addresses are digit groups too, but not phones.
    text = _NOT_PHONES.sub(" ", _IBAN_START.sub(" ", _CARD.sub(" ", text)))
    for match in _PHONE.finditer(text):
        digits = re.sub(r"\D", "", match.group())
        if 10 <= len(digits) <= 15:
            return True
    return False


def _card(text: str) -> bool:
    for match in _CARD.finditer(text):
        digits = re.sub(r"\D", "", match.group())
        if 13 <= len(digits) <= 19 and luhn_valid(digits):
            return True
    return False


def _ssn(text: str) -> bool:
    return _SSN.search(text) is not None


def _iban(text: str) -> bool:
    """An IBAN inside a sentence: the pattern also takes the words after it, so try every
    length an IBAN may have, longest first."""
    for match in _IBAN_START.finditer(text.upper()):
        compact = match.group().replace(" ", "")
        if any(iban_valid(compact[:n]) for n in range(min(34, len(compact)), 14, -1)):
            return True
    return False


def _ip(text: str) -> bool:
    for match in (*_IPV4.finditer(text), *_IPV6.finditer(text)):
        try:
            ipaddress.ip_address(match.group())
        except ValueError:
            continue
        return True
    return False


DETECTORS: dict[str, Callable[[str], bool]] = {
    "email": _email,
    "phone": _phone,
    "payment_card": _card,
    "us_ssn": _ssn,
    "iban": _iban,
    "ip_address": _ip,
}


def detect(texts: Iterable[str], enabled: Iterable[str]) -> list[str]:
    """Names of the enabled detectors that fire on any of `texts`, in DETECTORS order."""
    wanted = set(enabled)
    corpus = [t for t in texts if t]
    return [
        name
        for name, finds in DETECTORS.items()
        if name in wanted and any(finds(text) for text in corpus)
    ]
