"""Detectors of identity documents and birth dates in request text (pure): national ID numbers
(checksums where the number has one), passport numbers and dates of birth (by the words around
them, as a document's number has no shape of its own).

This is how the field's recognisers work for these (Presidio's are patterns, checksums and
context words too): a shape that a checksum confirms stands alone (an Aadhaar number's Verhoeff
digit, a codice fiscale's check letter, a DNI's letter, a French NIR's key); a shape that many
other numbers share counts only after a word that names it ("SIN", "BSN", "passport", "born").
Everything runs on RE2 and looks back a bounded window, so the scan stays linear in the text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import re2  # type: ignore[import-untyped]

from policies.id_labels import labelled_ids
from policies.re2text import spans

_WINDOW = 48  # bytes looked back for a context word

# UK National Insurance number: two letters, six digits, A-D (spaces allowed between pairs).
_NINO = re2.compile(r"(?:^|[^A-Za-z0-9])([A-Z]{2} ?\d{2} ?\d{2} ?\d{2} ?[A-D])(?:[^A-Za-z0-9]|$)")
_NINO_NEVER = (b"BG", b"GB", b"NK", b"KN", b"TN", b"NT", b"ZZ")
# Aadhaar: 12 digits, 4-4-4, not starting with 0 or 1; Verhoeff-checked.
# Not a part of a longer grouped number (a card's "5105 1051 0510 5100", an IBAN's tail).
_AADHAAR = re2.compile(
    r"(?:^|[^\d -]|[^\d][ -])([2-9]\d{3}[ -]?\d{4}[ -]?\d{4})(?:[^\d -]|[ -][^\d]|[ -]?$)"
)
# French NIR: sex, year, month, department (2A/2B for Corsica), commune, order, key.
_NIR = re2.compile(
    r"(?:^|[^\d])([12] ?\d{2} ?(?:0[1-9]|1[0-2]|[2-9]\d) ?(?:\d{2}|2[AB]) ?\d{3} ?\d{3} ?\d{2})"
    r"(?:[^\d]|$)"
)
# Italian codice fiscale, with its check letter.
_CODICE = re2.compile(
    r"(?:^|[^A-Za-z0-9])([A-Z]{6}\d{2}[A-EHLMPR-T]\d{2}[A-Z]\d{3}[A-Z])(?:[^A-Za-z0-9]|$)"
)
# Spanish DNI (8 digits and a letter) and NIE (X, Y or Z, 7 digits, a letter).
_DNI = re2.compile(r"(?:^|[^A-Za-z0-9])([XYZ]?\d{7,8}-?[A-Z])(?:[^A-Za-z0-9]|$)")
# Nine digits (3-3-3 or together): a Canadian SIN (Luhn) or a Dutch BSN (11-check) where named.
_NINE = re2.compile(r"(?:^|[^\d])(\d{3}[ -]?\d{3}[ -]?\d{3})(?:[^\d]|$)")
_NINE_CONTEXT = (b"sin", b"social insurance", b"bsn", b"burgerservice", b"sofi")

# "passport" in some thirty languages ("pass" alone is a word of English: only "passnummer")
_PASSPORT_CONTEXT = re2.compile(
    r"(?i)passport|passeport|reisepass|pasaporte|passaporto|paspoort|passaporte|passnummer|"
    r"pasnummer|passin numero|paszport|číslo pasu|cestovní pas|cestovný pas|putovnica|potni list|"
    r"pasaport|útlevél|паспорт|διαβατήρι|דרכון|جواز السفر|جواز سفر|گذرنامه|"
    r"پاسپورت|पासपोर्ट|หนังสือเดินทาง|hộ chiếu|paspor|旅券|パスポート|护照|護照|여권"
)
# A document number after it: 6 to 12 capital letters and digits, at least two digits, maybe in
# groups ("GB 512 8837 04").
_DOC_NUMBER = re2.compile(r"(?:^|[^A-Za-z0-9])([A-Z0-9][A-Z0-9 ]{4,14}[A-Z0-9])(?:[^A-Za-z0-9]|$)")
_BIRTH = re2.compile(
    r"(?i)(?:date[ _-]of[ _-]birth|d\.?o\.?b\.?|birth[ _-]?date|birthday|born|n[ée]e? le|"
    r"geboren|fecha de nacimiento|nacid[oa]|data di nascita|nat[oa] il)"
)
_MONTHS = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
_DATE = re2.compile(
    r"(?i)(?:\d{4}[-/.]\d{1,2}[-/.]\d{1,2}"  # 1990-06-30
    r"|\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4}"  # 22.08.1995, 03/07/1961
    rf"|\d{{1,2}}(?:st|nd|rd|th)?[ -]{_MONTHS}[ ,-]*\d{{4}}"  # 12 May 1999, 31-Oct-1975
    rf"|{_MONTHS} \d{{1,2}}(?:st|nd|rd|th)?,? \d{{4}})"  # May 12, 1999
)


def compact(candidate: bytes) -> str:
    return candidate.decode().replace(" ", "").replace("-", "")


def verhoeff_valid(digits: str) -> bool:
    check = 0
    for position, digit in enumerate(reversed(digits)):
        check = _VERHOEFF_D[check][_VERHOEFF_P[position % 8][int(digit)]]
    return check == 0


# Verhoeff's tables: multiplication in the dihedral group D5, and the position permutation.
_VERHOEFF_D = [
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
    [1, 2, 3, 4, 0, 6, 7, 8, 9, 5],
    [2, 3, 4, 0, 1, 7, 8, 9, 5, 6],
    [3, 4, 0, 1, 2, 8, 9, 5, 6, 7],
    [4, 0, 1, 2, 3, 9, 5, 6, 7, 8],
    [5, 9, 8, 7, 6, 0, 4, 3, 2, 1],
    [6, 5, 9, 8, 7, 1, 0, 4, 3, 2],
    [7, 6, 5, 9, 8, 2, 1, 0, 4, 3],
    [8, 7, 6, 5, 9, 3, 2, 1, 0, 4],
    [9, 8, 7, 6, 5, 4, 3, 2, 1, 0],
]
_VERHOEFF_P = [[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]]
for _ in range(7):
    _VERHOEFF_P.append([_VERHOEFF_P[-1][d] for d in [1, 5, 7, 6, 2, 8, 3, 0, 9, 4]])


def nir_valid(compact: str) -> bool:
    body = compact[:13].replace("2A", "19").replace("2B", "18")
    return body.isdigit() and 97 - int(body) % 97 == int(compact[13:])


_CF_ODD = dict(
    zip(
        "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ",
        [1, 0, 5, 7, 9, 13, 15, 17, 19, 21] * 1
        + [1, 0, 5, 7, 9, 13, 15, 17, 19, 21, 2, 4, 18, 20, 11, 3, 6, 8, 12, 14, 16, 10, 22, 25]
        + [24, 23],
        strict=True,
    )
)


def codice_fiscale_valid(code: str) -> bool:
    total = 0
    for position, char in enumerate(code[:15], start=1):
        if position % 2:
            total += _CF_ODD[char]
        else:
            total += int(char) if char.isdigit() else ord(char) - ord("A")
    return chr(ord("A") + total % 26) == code[15]


def dni_valid(code: str) -> bool:
    number = code[:-1].replace("X", "0").replace("Y", "1").replace("Z", "2")
    return number.isdigit() and "TRWAGMYFPDXBNJZSQVHLCKE"[int(number) % 23] == code[-1]


def _luhn(digits: str) -> bool:
    total = 0
    for position, digit in enumerate(reversed(digits)):
        value = int(digit) * (2 if position % 2 else 1)
        total += value - 9 if value > 9 else value
    return total % 10 == 0


def _eleven_check(digits: str) -> bool:
    weights = (9, 8, 7, 6, 5, 4, 3, 2, -1)
    return sum(int(d) * w for d, w in zip(digits, weights, strict=True)) % 11 == 0


def _named(data: bytes, start: int, words: tuple[bytes, ...]) -> bool:
    before = data[max(0, start - _WINDOW) : start].lower()
    return any(word in before for word in words)


# Numbers that stand alone once their checksum holds (also taken out before looking for phones).
CHECKED_NUMBERS: tuple[tuple[Any, Callable[[str], bool]], ...] = (
    (_AADHAAR, verhoeff_valid),
    (_NIR, nir_valid),
)


def national_ids(data: bytes) -> Iterator[tuple[int, int]]:
    yield from (s for s in spans(_NINO, data) if data[s[0] : s[0] + 2] not in _NINO_NEVER)
    for pattern, valid in (*CHECKED_NUMBERS, (_CODICE, codice_fiscale_valid), (_DNI, dni_valid)):
        yield from (s for s in spans(pattern, data) if valid(compact(data[s[0] : s[1]])))
    for start, end in spans(_NINE, data):
        digits = compact(data[start:end])
        if _named(data, start, _NINE_CONTEXT) and (_luhn(digits) or _eleven_check(digits)):
            yield start, end
    yield from labelled_ids(data)


def passports(data: bytes) -> Iterator[tuple[int, int]]:
    for _, end in spans(_PASSPORT_CONTEXT, data):
        window = data[end : end + _WINDOW]
        for start, stop in spans(_DOC_NUMBER, window):
            number = compact(window[start:stop])
            if 6 <= len(number) <= 12 and sum(c.isdigit() for c in number) >= 2:
                yield end + start, end + stop


def dates_of_birth(data: bytes) -> Iterator[tuple[int, int]]:
    for _, end in spans(_BIRTH, data):
        date = _DATE.search(data[end : end + _WINDOW])
        if date is not None:
            yield end + date.start(), end + date.end()
