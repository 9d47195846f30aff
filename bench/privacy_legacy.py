"""The personal-data detectors as they were before RE2 (policies/pii.py's lookaround patterns on
Python's re, copied verbatim): bench/privacy_worst_case.py times them beside today's, and
tests/unit/policies/test_pii_adversarial.py checks both agree where the old ones finish."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable

from policies.numbers import iban_valid, luhn_valid

Detector = Callable[[str], bool]


_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
_PHONE = re.compile(
    r"(?<![\w.+])(?:"
    r"\+\d{1,3}[\s.-]?(?:\(\d{1,4}\)[\s.-]?)?\d{1,5}(?:[\s.-]\d{2,6}){1,4}"  # +CC with groups
    r"|(?:\(\d{1,4}\)[\s.-]?)?\d{2,4}(?:[\s.-]\d{2,4}){1,4}"  # national, grouped
    r"|\+\d{9,15}"  # E.164 without separators
    r")(?![\w.])"
)
_NOT_PHONES = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2})?)?|\d{1,2}:\d{2}(?::\d{2})?"
    r"|(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])"
)
_CARD = re.compile(r"(?<!\d)(?:\d[ -]?){12,18}\d(?!\d)")
_SSN = re.compile(r"(?<!\d)(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?!\d)")
_IBAN_START = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}")
_IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])")
_IPV6 = re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])")


def _email(text: str) -> bool:
    return _EMAIL.search(text) is not None


def _phone(text: str) -> bool:
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


LEGACY: dict[str, Detector] = {
    "email": _email,
    "phone": _phone,
    "payment_card": _card,
    "us_ssn": _ssn,
    "iban": _iban,
    "ip_address": _ip,
}
