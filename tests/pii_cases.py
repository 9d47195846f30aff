"""Text built to be slow for the personal-data detectors: long runs of the characters each
pattern accepts, with and without what completes a match at the very end (shared by the unit
tests at the scan limit and the integration tests at a whole body's 4 MB)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest


@dataclass(frozen=True)
class Case:
    detector: str
    unit: str  # repeated to fill the text
    end: str  # the text's last characters
    found: bool

    def text(self, size: int) -> str:
        return self.unit * ((size - len(self.end)) // len(self.unit)) + self.end


def case(detector: str, unit: str, end: str, found: bool) -> Any:
    return pytest.param(Case(detector, unit, end, found), id=f"{detector}-{unit!r}-{end!r}")


CASES = [
    case("email", "a", "", False),
    case("email", "a", "@exemplo.com", True),
    case("email", "@", "", False),
    case("email", "a@", "", False),
    case("email", "a@", "b.co", True),
    case("email", "a.", "", False),
    case("email", "a.", "@x.io", True),
    case("email", "a@a.", "", False),
    case("email", "a@a.", "io", True),
    case("phone", "1", "", False),
    case("phone", "1 ", "", False),
    case("phone", "1 ", " call 415-555-0100", True),
    case("phone", "1.", "", False),
    case("phone", "12.", "", False),
    case("phone", "1-", "", False),
    case("phone", "(1)", "", False),
    case("phone", "(1)", " (415) 555-0100", True),
    case("phone", "+1", "", False),
    case("phone", "+1 23 45 ", "", False),  # +CC and groups, too few digits: every one checked
    case("phone", "12:30:45 ", "+1 415 555 0100", True),  # times, each removed first
    case("phone", "\u0664", "", False),  # Arabic-Indic digits
    case("payment_card", "1", "", False),
    case("payment_card", "1 ", "", False),  # 19-digit candidates, none passing Luhn
    case("payment_card", "1-", "; card 4539-1488-0343-6467", True),
    case("payment_card", "4111 1111 1111 1112 ", "", False),
    case("us_ssn", "1", "", False),
    case("us_ssn", "1-", "", False),
    case("us_ssn", "123-", "", False),
    case("us_ssn", "123-", "45-6789", True),
    case("us_ssn", "000-00-0000 ", "123-45-6789", True),  # never issued, each checked
    case("iban", "A", "", False),
    case("iban", "A1", "", False),
    case("iban", "AB12", "", False),
    case("iban", "AB12 ", ", IBAN GB82 WEST 1234 5698 7654 32", True),
    case("ip_address", "1.", "", False),
    case("ip_address", "1.", " 8.8.8.8", True),
    case("ip_address", "999.1.1.1 ", "", False),
    case("ip_address", "a:", "", False),
    case("ip_address", "a:", " ::1", True),
    case("ip_address", ":", "", False),
    case("ip_address", "1:::1 ", "fe80::1", True),
    case("ip_address", "12:30:45 ", "", False),
    case("secret", "AKIA", "", False),
    case("secret", "eyJ", "", False),
    case("secret", "eyJabcdefghijk.", "", False),
    case("secret", "-----BEGIN PRIVATE KEY-----", "", False),
    case(
        "secret", "-----BEGIN PRIVATE KEY-----", "\n" + "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" * 2, True
    ),
    case("secret", "db://u:", "", False),
    case("secret", "db://u:", "c9Zq4Lm@db.internal", True),
    case("secret", "password=", "", False),
    case("secret", ";Password=", "H7kw2Lq9;", True),
    case("secret", "api_key = '", "", False),
    case("secret", "x", " token: ghp_" + "aB3" * 12, True),
    case("national_id", "2345 ", "", False),
    case("national_id", "AB 12 ", "", False),
    case("national_id", "sin 123 ", "", False),
    case("national_id", "2345 ", "x Aadhaar 2345 6789 0124", True),
    case("passport", "passport ", "", False),
    case("passport", "passport 1 ", "", False),
    case("passport", "passport ", "passport K4829175", True),
    case("date_of_birth", "born ", "", False),
    case("date_of_birth", "dob 1-", "", False),
    case("date_of_birth", "born ", "born 1990-06-30", True),
]
