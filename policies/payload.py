"""What a request would carry to a target, as the privacy detectors must read it (pure).

Every string of the body, whatever field it sits in (messages and their parts, tool calls and
results, tools, response formats, predictions, suffixes, `user`, `metadata`, prompts, embedding
inputs, fields a future API adds), each with the path it sits at (`messages[2].content`), so a
reason can name where personal data was found without repeating it. Field names are read too;
the model's name is not (it is the operator's, and a route's key).

Text is normalised first, so that a detector sees what a model reads: Unicode NFKC (fullwidth
and other compatibility forms become their plain characters), format characters removed
(zero-width spaces and joiners, soft hyphens, bidirectional marks: invisible, and able to break
a pattern in two), and decimal digits of every script folded to ASCII.

Media parts (images, audio, files) are not text: their data is never fed to text detectors (a
base64 image is a long run of letters and digits in which patterns find IBANs, and scanning
megabytes of it costs a second of CPU). They are counted instead, for the policy's own rule on
requests that carry media.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

# Content parts that carry media: their data is skipped, their presence is noted.
MEDIA_PART_TYPES = frozenset(
    {"image_url", "image", "input_image", "input_audio", "audio", "file", "input_file"}
)
_DATA_URL = "data:"
_BASE64_MARK = ";base64,"
# The fields of a media part that hold its bytes (base64), whatever the part's type.
MEDIA_DATA_FIELDS = ("data", "file_data")
_DATA_FIELDS = tuple(f".{name}" for name in MEDIA_DATA_FIELDS)
_NAME = " (field name)"  # a field name's path: the field's path and this


class _Fold(dict[int, str | None]):
    """str.translate's table, filled as characters are met: format characters removed, decimal
    digits of any script to ASCII (a table of every code point would take a second to build)."""

    def __missing__(self, code: int) -> str | None:
        char = chr(code)
        category = unicodedata.category(char)
        folded: str | None = char
        if category == "Cf":
            folded = None
        elif category == "Nd":
            folded = str(unicodedata.decimal(char))
        self[code] = folded
        return folded


_FOLD = _Fold()


def normalized(text: str) -> str:
    """`text` as the detectors read it. ASCII text is returned as it is (nothing to do)."""
    if text.isascii():
        return text
    return unicodedata.normalize("NFKC", text).translate(_FOLD)


@dataclass(frozen=True)
class Payload:
    texts: tuple[str, ...]  # normalised
    carries_media: bool  # media data (base64 fields, data URLs), not read
    read: dict[str, Any] = field(repr=False, compare=False)  # the body as read (no model)

    @cached_property
    def paths(self) -> tuple[str, ...]:
        """Where each text sits (a field name: its field's path + _NAME). Found again when a
        reason must name a place: most requests never need one, and paths cost a string each."""
        return tuple(path for path, _, is_media in _walk(self.read, True) if not is_media)

    @cached_property
    def media(self) -> tuple[str, ...]:
        """The paths of media data."""
        if not self.carries_media:
            return ()
        return tuple(path for path, _, is_media in _walk(self.read, True) if is_media)


def payload_of(body: dict[str, Any]) -> Payload:
    read = {k: v for k, v in body.items() if k != "model"}
    texts: list[str] = []
    media = False
    for _, text, is_media in _walk(read, False):
        if is_media:
            media = True
        else:
            texts.append(normalized(text))
    return Payload(tuple(texts), media, read)


def walk_texts(body: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(path, string) for every string of a body, field names and media data included."""
    for path, text, _ in _walk(body, True):
        yield path, text


def _walk(value: Any, paths: bool) -> Iterator[tuple[str, str, bool]]:
    """(place, text, is media) for every string under `value`, depth first, in order; the place
    is the string's path with `paths`, else only the path's last step (all that says whether it
    is media data). Iterative: a body may be nested deep (the parser bounds it, but this must
    not depend on that). In a media part, only its data is media: a URL, a file name or a
    detail is text that leaves."""
    stack: list[tuple[Any, str, bool]] = [(value, "", False)]
    while stack:
        item, where, in_media = stack.pop()
        if isinstance(item, str):
            yield where, item, is_data_url(item) or (in_media and where.endswith(_DATA_FIELDS))
        elif isinstance(item, list):
            if paths:
                children = [(child, f"{where}[{i}]", in_media) for i, child in enumerate(item)]
            else:
                children = [(child, "[]", in_media) for child in item]
            stack.extend(reversed(children))
        elif isinstance(item, dict):
            media = in_media or is_media_part(item)
            # a path is empty only where every step so far was an empty key: so is its last step
            parent = f"{where}." if where else ""
            for key, child in reversed(list(item.items())):
                place = f"{parent if paths else parent and '.'}{key}"
                stack.append((child, place, media))
                stack.append((key, place + _NAME if paths else "", False))


def is_media_part(part: dict[str, Any]) -> bool:
    kind = part.get("type")  # a client's: any JSON value (a list is no key of a set)
    return isinstance(kind, str) and kind in MEDIA_PART_TYPES


def is_data_url(text: str) -> bool:
    return text.startswith(_DATA_URL) and _BASE64_MARK in text[:256]
