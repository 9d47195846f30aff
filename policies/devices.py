"""Identifiers of a person's device (pure): a network card's hardware address ("MAC
00:1A:2B:3C:4D:5E"), a phone's IMEI (15 digits, Luhn-checked, after its label), and the
identifiers that platforms give a device or its advertising profile after their label
("Android ID: 9774d56d682e549c", "IDFA: 6D92078A-8246-4BA4-AE5B-76104861E7DC").

A hardware address is told by its shape: six pairs of hex digits parted by one kind of colon
or hyphen, not the broadcast or zero address that names no card. An IMEI's digits are any
15-digit number's, so it counts only after its label. RE2: linear in the text.
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.labelled import SEPARATOR_OR_SPACE, labelled
from policies.numbers import luhn_valid
from policies.re2text import compile_unicode, digits_of, spans

_MAC = compile_unicode(
    r"(?:^|[^\w:-])([0-9A-Fa-f]{2}(?:(?::[0-9A-Fa-f]{2}){5}|(?:-[0-9A-Fa-f]{2}){5}))"
    r"(?:[^\w:-]|$)"
)
_NO_CARD = (b"00:00:00:00:00:00", b"ff:ff:ff:ff:ff:ff")
_IMEI = labelled(
    ("imei", "imei number", "imei no", "meid"),
    r"\d{2}[ -]?\d{6}[ -]?\d{6}[ -]?\d",
    SEPARATOR_OR_SPACE,
)
_PLATFORM_IDS = labelled(
    ("device id", "android id", "advertising id", "idfa", "idfv", "gaid", "aaid", "udid"),
    r"[0-9A-Fa-f][0-9A-Fa-f-]{14,38}[0-9A-Fa-f]",
)


def device_ids(data: bytes) -> Iterator[tuple[int, int]]:
    """Where device identifiers are in `data` (UTF-8)."""
    for start, end in spans(_MAC, data):
        if data[start:end].lower().replace(b"-", b":") not in _NO_CARD:
            yield start, end
    for start, end in spans(_IMEI, data):
        if luhn_valid(digits_of(data[start:end])):
            yield start, end
    yield from spans(_PLATFORM_IDS, data)
