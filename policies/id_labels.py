"""National ID numbers known by the word that names them, in some forty countries' languages,
and China's resident ID by its own check (pure).

Most countries' identity numbers are digits with no shape of their own, and many have no
checksum anyone outside their registry can run; what marks one in a text is its name: "PESEL:
44051401359", "T.C. Kimlik No: 10000000146", "ИНН 7707083893", "주민등록번호: 800101-1234567",
"身份证号：...". After such a name, a value of letters and digits (five digits at least, in
groups parted by a space, dot, slash or hyphen) counts. A bare "ID" is no such name: an order,
a ticket and a row have IDs too. Numbers with a checksum of their own (a DNI, a codice
fiscale, an Aadhaar, a BSN, a NIR: policies/identifiers.py) are left to it, named or not.

China's resident identity number needs no name: 17 digits and a check character (ISO 7064
MOD 11-2) around a birth date (YYYYMMDD) is a shape no order or phone number takes by chance.
RE2 throughout: linear in the text.
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.labelled import SEPARATOR_OR_SPACE, labelled
from policies.re2text import compile_unicode, spans

_LABELS = (
    # the Americas, Europe
    "national id", "national id number", "national identity number", "identity number",
    "identity card number", "id card number", "personal id number", "personal identity number",
    "national insurance number", "social insurance number", "tax id", "taxpayer id",
    "cpf", "cnpj", "curp", "nss", "número de identidad",
    "cédula", "cedula", "cédula de identidad", "carte d'identité", "numéro d'identité",
    "numéro fiscal",
    "carta d'identità", "steuer-id", "steueridentifikationsnummer", "steuernummer",
    "rentenversicherungsnummer", "rentenversicherungsnr", "sozialversicherungsnummer",
    "personalausweisnummer", "ausweisnummer", "ahv-nummer", "ahv", "avs",
    "rijksregisternummer", "personnummer", "cpr-nummer",
    "fødselsnummer", "kennitala", "henkilötunnus", "hetu", "isikukood",
    "asmens kodas", "personas kods", "pesel", "rodné číslo", "rodné čislo",
    "osobní číslo", "személyi azonosító", "személyi szám", "adóazonosító", "taj szám",
    "cnp", "egn", "оиб", "oib", "jmbg", "emšo", "αμκα", "αφμ", "α.μ.κ.α", "α.φ.μ",
    "t.c. kimlik no", "tc kimlik no", "kimlik no", "kimlik numarası",
    "инн", "снилс", "іпн", "рнокпп", "егн", "личен номер", "идентификационный номер",
    # the Middle East, South and South-East Asia
    "תעודת זהות", "מספר זהות", "ת.ז", "رقم الهوية", "الرقم الوطني", "رقم الهوية الوطنية",
    "کد ملی", "شماره ملی",
    "เลขประจำตัวประชาชน", "เลขบัตรประชาชน", "số cccd", "số cmnd", "căn cước",
    "căn cước công dân", "nik", "no. ktp", "nomor ktp", "mykad", "nric",
    # East Asia
    "身份证号", "身份证号码", "身份证", "公民身份号码", "身分證字號", "身分證號碼", "身分證",
    "個人番号", "マイナンバー", "住民票コード", "주민등록번호", "주민번호", "외국인등록번호",
)  # fmt: skip
# Groups with a digit, or of at most three capitals ("AB 12 34 56 C"); the first has a digit,
# so prose after the name ("tax ID is required for ...") is no value.
_NUMBER_GROUP = r"[A-Za-z0-9]*\d[A-Za-z0-9]*"
_VALUE = rf"{_NUMBER_GROUP}(?:[ ./\-](?:{_NUMBER_GROUP}|[A-Z]{{1,3}})){{0,5}}"
_ID = labelled(_LABELS, f"(?-i:{_VALUE})", SEPARATOR_OR_SPACE)
_LEAST_DIGITS = 5
# 6 digits of region, a birth date (19xx or 20xx), 3 of order, a check digit or X
_CHINA = compile_unicode(
    r"(?:^|[^\dA-Za-z])(\d{6}(?:19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\d{3}[\dXx])"
    r"(?:[^\dA-Za-z]|$)"
)
_CHINA_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)


def china_valid(number: str) -> bool:
    """ISO 7064 MOD 11-2 over the first 17 digits gives the 18th (10 written X)."""
    total = sum(int(d) * w for d, w in zip(number[:17], _CHINA_WEIGHTS, strict=True))
    return "10X98765432"[total % 11] == number[17].upper()


def labelled_ids(data: bytes) -> Iterator[tuple[int, int]]:
    """Where an identity number follows its name, and where a Chinese resident ID is."""
    for start, end in spans(_ID, data):
        if sum(byte in _DIGITS for byte in data[start:end]) >= _LEAST_DIGITS:
            yield start, end
    for start, end in spans(_CHINA, data):
        if china_valid(data[start:end].decode()):
            yield start, end


_DIGITS = frozenset(b"0123456789")
