"""Phone numbers in request text (pure): by their shape, and by the word that labels them.

By shape: an international number ("+44 7700 900123", "+393889021471", "+39 3889021471"), or a
national one in digit groups ("020 7946 0958", "(555) 010-0199", "0151 23456789"), of 10 to 15
digits. Shorter national numbers ("467 3395", "9472 7916") are as often an order, a sum or a
count, so they count only after a word for a phone, in any of some forty languages ("Tel.:
467 3395", "Telefon: 722 233 820", "電話：03-1234-5678", "call me on 9472 7916"): then 7 to 15
digits, however grouped.

Card numbers, IBANs, dates, times and IP addresses are digit groups too, but not phones: the
real ones are removed first (a number only shaped like a card may still be a phone), and so are
national IDs that pass their checksum. RE2 throughout: linear in the text.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator

from policies import identifiers, numbers
from policies.labelled import SEPARATOR_OR_SPACE, labelled
from policies.re2text import blank, compile_unicode, digits_of, spans

_PHONE = compile_unicode(
    r"(?:^|[^\w.+-])("  # not a part of an identifier ("INV-2026-000184")
    r"\+\d{1,3}[\s.-]?(?:\(\d{1,4}\)[\s.-]?)?\d{1,5}(?:[\s.-]\d{2,8}){1,4}"  # +CC with groups
    r"|\+\d{1,3}[\s.-]?\d{6,14}"  # +CC, then the number without separators
    r"|(?:\(\d{1,4}\)[\s.-]?)?"  # national: an area code in brackets, or not
    r"(?:\d{2,5}[\s.-]\d{6,8}"  # 0151 23456789
    r"|(?:\d[.-]|\d{2,5}[\s.-])\d{2,4}(?:[\s.-]\d{2,4}){0,3})"  # 1-800-555-0199, 020 7946 0958
    r"|\+\d{9,15}"  # E.164 without separators
    # After it: not a word character; a full stop or hyphen only before a non-word (a sentence's
    # end, yes; a serial number's "-A", no).
    r")(?:[^\w.-]|[.-](?:[^\w]|$)|$)"
)
# Digit groups that are not phone numbers (dates, times, IPv4), removed before looking for one.
_NOT_PHONES = compile_unicode(
    r"(\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2})?)?|\d{1,2}:\d{2}(?::\d{2})?)"
    r"|(?:^|[^\d.])((?:\d{1,3}\.){3}\d{1,3})(?:[^\d.]|$)"
)
_PHONE_LABELS = (
    # English
    "phone", "phone number", "phone no", "telephone", "tel", "mobile", "mobile number", "mob",
    "cell", "cell phone", "cellphone", "fax", "landline", "whatsapp", "contact number",
    "call me at", "call me on", "reach me at", "reach me on", "text me at", "text me on",
    # Germanic
    "telefon", "telefonnummer", "rufnummer", "handy", "handynummer", "mobil", "mobilnummer",
    "telefoon", "telefoonnummer", "mobiel", "tlf", "tlf.nr", "mobiltelefon", "sími", "farsími",
    # Romance
    "téléphone", "tél", "tél.", "portable", "numéro de téléphone", "teléfono", "telefono",
    "tfno", "tfno.", "tfn", "telf", "telf.", "telfs", "telfs.", "tlf.", "tel.", "móvil", "movil",
    "número de teléfono", "numero de telefono", "número de móvil", "numero de movil", "celular",
    "telefone", "telemóvel", "telefono", "cellulare", "numero di telefono", "număr de telefon",
    # Slavic, Baltic, Finno-Ugric, Greek, Turkish
    "телефон", "тел", "моб", "мобильный", "мобільний", "telefonszám", "mobiltelefon", "puhelin",
    "puhelinnumero", "matkapuhelin", "gsm", "komórka", "telefón", "mobitel", "τηλέφωνο", "τηλ",
    "κινητό", "cep telefonu", "telefon numarası", "tālrunis", "telefonas",
    # Semitic, Iranian, Indic, South-East Asian
    "טלפון", "נייד", "הטלפון", "الهاتف", "هاتف", "الجوال", "جوال", "موبايل", "رقم الهاتف",
    "تلفن", "موبایل", "شماره تلفن", "फ़ोन", "फोन", "मोबाइल", "दूरभाष", "फ़ोन नंबर",
    "โทรศัพท์", "โทร", "มือถือ", "điện thoại", "sđt", "số điện thoại", "telepon", "telp",
    "ponsel", "nomor telepon",
    # East Asian
    "電話", "電話番号", "携帯", "携帯電話", "电话", "电话号码", "手机", "手機", "联系电话",
    "聯絡電話", "전화", "전화번호", "휴대폰", "핸드폰", "연락처",
)  # fmt: skip
_LABELLED = labelled(_PHONE_LABELS, r"\+?\(?\d[\d \-./()]{5,22}\d", SEPARATOR_OR_SPACE)


def phones(data: bytes) -> Iterator[tuple[int, int]]:
    clear = blank(numbers.CARD, data, numbers.is_card)
    clear = blank(numbers.IBAN, clear.upper(), lambda match: match[:2] in numbers.IBAN_SHAPED)
    clear = blank(_NOT_PHONES, clear)
    for pattern, valid in identifiers.CHECKED_NUMBERS:  # an Aadhaar or NIR checks out: not a phone
        clear = blank(pattern, clear, functools.partial(_checks_out, valid))
    yield from (s for s in spans(_PHONE, clear) if 10 <= len(digits_of(clear[s[0] : s[1]])) <= 15)
    yield from (s for s in spans(_LABELLED, clear) if 7 <= len(digits_of(clear[s[0] : s[1]])) <= 15)


def _checks_out(valid: Callable[[str], bool], candidate: bytes) -> bool:
    return valid(identifiers.compact(candidate))
