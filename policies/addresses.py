"""Street addresses in request text (pure): a house number beside a street.

An address is told from other text by its shape, not by a list of places: a number next to a
name that ends in (or starts with) a street word. These shapes cover most of the world's
addresses written on one line:
- number, name, street type: "742 Maple Avenue", "63B Queen Street", "350 5th ave";
- number, street type, name (French, and English "Avenue of ..."): "18 Rue des Martyrs";
- street type, name, number (Latin Europe), or a compound street word and a number (Germanic,
  Nordic, Finnish): "Via Garibaldi 12", "Lindenstraße 14", "Prinsengracht 418", "Puistokatu 4";
- name, street type, number (Hungarian, Nordic, Baltic): "Király u. 15.", "Luite tee 87";
- a street type no prose word starts with, first ("ul. Miła 53", "ул. Ленина 5");
- a name and a number, then a flat or suite: "Harbour View 14 Apt. 3";
- a US military address's last line: "APO AE 09012".
A street named without a number ("Broadway", "Rue de Rivoli"), a road number ("Route 66"), a
room or a postcode alone are not addresses. Whatever its shape, in any script, an address also
follows the word that labels it ("Domicilio: c/ del Abedul 5-7", "住所：東京都港区芝公園4-2-8",
"주소: 서울시 ...", policies/labelled.py): the rest of the line, at most 80 characters, with a
letter and a digit in it. RE2 throughout: linear in the text.
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.labelled import COLON, labelled
from policies.re2text import compile_unicode, spans

# Street types written after the name (English), whole words, any case.
_AFTER = (
    "street|st|road|rd|avenue|ave|av|boulevard|blvd|lane|ln|drive|court|ct|close|crescent|"
    "place|pl|terrace|way|square|sq|parkway|pkwy|highway|hwy|row|gardens|grove|mews|walk|"
    "hill|circle|cir|alley|trail|esplanade|parade|quay|wharf"
)
# Street types written before the name (Romance languages, and English "Avenue of ...").
_BEFORE = (
    "rue|avenue|av|boulevard|bd|bld|place|pl|chemin|allée|allee|quai|impasse|cours|via|viale|"
    "piazza|piazzale|corso|vicolo|calle|c/|avenida|avda|plaza|paseo|carrer|rua|travessa|largo|"
    "praça|praca|rambla|camino|ronda"
)
# Germanic and Nordic compounds: the street word ends the name ("Lindenstraße", "Kalverstraat").
_COMPOUND = (
    "straße|strasse|str\\.|weg|gasse|platz|allee|damm|ufer|chaussee|steig|"
    "straat|gracht|laan|plein|kade|dijk|singel|markt|wei|hove|dreef|steeg|"
    "vej|gade|gatan|gata|gaten|vägen|veien|vegen|torget|stien|stræde|gränd|"
    "tie|katu|kuja|polku|tori|kaari|rinne|väylä|raitti|braut|stræti|straeti|vegur|stígur"
)
# Street types written after the name and before the number (Hungarian, Nordic, Baltic,
# Slavic, Turkish): "Király u. 15.", "Erzsébet tér 19.", "Luite tee 87", "Trenerys gate 232".
_BETWEEN_TYPE = (
    r"u\.|utca|út|útja|tér|tere|körút|krt\.|rkp\.|köz|sor|tee|tänav|gate|gatan|vei|veien|vej|"
    r"gade|iela|gatvė|gatve|cesta|trg|sokak|sk\.|caddesi|cad\.|cd\.|bulvarı|str\."
)
# Street types written first that no word of prose begins with: abbreviations with their full
# stop, and names in other scripts ("ul. Miła 53", "Λ. Αλεξάνδρας 14", "ул. Ленина 5").
_MARKED_FIRST = (
    r"ul\.|ulica|ulice|nám\.|náměstí|námestie|avda\.|rúa|strada|piazzetta|calea|"
    r"ул\.|улица|вул\.|вулиця|просп\.|проспект|пер\.|провулок|"
    r"λ\.|λεωφ\.|λεωφόρος|οδός|οδ\.|πλατεία"
)
# A secondary unit after a house number: "Kiannonkatu 98 Apt. 105", "Brisas 6802 Suite 084"
# (not "Room": "Building 5, Room 3" is no one's home).
_UNIT = r"apt|apartment|suite|ste|flat|piso|wohnung|whg|lgh|appartement|apto"
_NUMBER = r"\d{1,5}(?:[ ]?[A-Za-z](?:\b|$))?(?:[-/]\d{1,4}|-[IVX]{1,4})?"
# A word of a street's name: capitalised, or a number ("5th", "42nd").
_NAME_WORD = r"[\p{Lu}\d][\w'’.-]*"
_AFTER_TYPE = compile_unicode(
    rf"(?:^|[^\w])({_NUMBER},?[ ]+(?:{_NAME_WORD}[ ]+){{1,4}}(?i:{_AFTER})\.?)(?:[^\w]|$)"
)
_BEFORE_TYPE = compile_unicode(
    rf"(?:^|[^\w])({_NUMBER},?[ ]+(?i:{_BEFORE})[ ]+(?:[\w'’.-]+[ ]+){{0,3}}\p{{Lu}}[\w'’-]*)"
)
# Type first: capitalised ("Via Garibaldi 12"), as "install it via pip 23" is no address.
_CAPITALISED_BEFORE = "|".join(word.capitalize() for word in _BEFORE.split("|"))
_TYPE_FIRST = compile_unicode(
    rf"(?:^|[^\w])((?:{_CAPITALISED_BEFORE})[ ]+(?:[\w'’.-]+[ ]+){{0,3}}"
    rf"\p{{Lu}}[\w'’.-]*,?[ ]+{_NUMBER})(?:[^\w]|$)"
)
_COMPOUND_NUMBER = compile_unicode(
    rf"(?:^|[^\w])(\p{{L}}[\w'’-]*(?i:{_COMPOUND})[ ]+{_NUMBER})(?:[^\w]|$)"
)
_NAME_TYPE_NUMBER = compile_unicode(
    rf"(?:^|[^\w])((?:\p{{Lu}}[\w'’.-]*[ ]+){{1,3}}(?i:{_BETWEEN_TYPE})[ ]+{_NUMBER}\.?)"
    r"(?:[^\w]|$)"
)
_MARKED_TYPE_FIRST = compile_unicode(
    rf"(?:^|[^\w])((?i:{_MARKED_FIRST})[ ]+(?:[\w'’.-]+[ ]+){{0,3}}\p{{L}}[\w'’.-]*,?[ ]+"
    rf"{_NUMBER})(?:[^\w]|$)"
)
_NUMBER_UNIT = compile_unicode(
    rf"(?:^|[^\w])(\p{{Lu}}[\w'’.-]*[ ]+{_NUMBER}\.?,?[ ]+(?i:{_UNIT})\.?[ ]*#?[ ]*\d{{1,5}})"
    r"(?:[^\w]|$)"
)
# A US military address's last line (USPS): "APO AA 34021", "FPO AP 96601", "DPO AE 09498".
_MILITARY = compile_unicode(r"(?:^|[^\w])((?i:apo|fpo|dpo)[ ]+(?i:aa|ae|ap)[ ]+\d{5})(?:[^\w]|$)")
_LABELS = (
    "address", "home address", "street address", "postal address", "mailing address",
    "domicilio", "dirección", "direccion", "adresse", "anschrift", "wohnadresse", "indirizzo",
    "endereço", "morada", "adres", "adress", "adresse postale", "osoite", "adresa", "адрес",
    "адреса", "διεύθυνση", "cím", "lakcím", "adresi", "כתובת", "العنوان", "عنوان", "पता",
    "ที่อยู่", "địa chỉ", "alamat", "住所", "地址", "住址", "주소",
)  # fmt: skip
_LABELLED = labelled(_LABELS, r"[^\n\"]{0,80}", COLON)  # a JSON value ends at its quote
_SHAPES = (
    _AFTER_TYPE,
    _BEFORE_TYPE,
    _TYPE_FIRST,
    _COMPOUND_NUMBER,
    _NAME_TYPE_NUMBER,
    _MARKED_TYPE_FIRST,
    _NUMBER_UNIT,
    _MILITARY,
)


def street_addresses(data: bytes) -> Iterator[tuple[int, int]]:
    """Where each address shape is found, shape by shape (spans may overlap across shapes:
    redaction merges them)."""
    for shape in _SHAPES:
        yield from spans(shape, data)
    for start, end in spans(_LABELLED, data):
        if _a_place(data[start:end].decode("utf-8", "replace").strip()):
            yield start, end


def _a_place(value: str) -> bool:
    """A labelled value that may be a place: a letter and a digit, and not a web, mail, IP or
    hardware address (one word of ASCII, or a "://" or "@" in it); a CJK address is one word
    of its own script ("東京都港区芝公園4-2-8")."""
    if "://" in value or "@" in value or (value.isascii() and not any(c.isspace() for c in value)):
        return False
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)
