"""What a request would carry to a target, as the privacy detectors must read it (pure).

Every string of the body, whatever field it sits in (messages and their parts, tool calls and
results, tools, response formats, predictions, suffixes, `user`, `metadata`, prompts, embedding
inputs, fields a future API adds), each with the path it sits at (`messages[2].content`), so a
reason can name where personal data was found without repeating it. Field names are read too;
the model's name is not (it is the operator's, and a route's key).

Text is normalised first, so that a detector sees what a model reads: Unicode NFKC (fullwidth
and other compatibility forms become their plain characters), tag characters read as
the ASCII they stand for (as models read them), other format characters removed
(zero-width spaces and joiners, soft hyphens, bidirectional marks: invisible, and able to break
a pattern in two), and decimal digits of every script folded to ASCII.

Text is read up to the scan's cap (policies/pii.py SCAN_LIMIT_CHARS, counted after normalising):
once the texts pass it, the rest is not normalised or kept (what lies past the cap counts as
found anyway), and a long text is normalised a piece at a time, so a body of characters that
NFKC expands 18-fold is never expanded whole first, and no call holds a thread long.

Media parts (images, audio, files) are not text: their data is never fed to text detectors (a
base64 image is a long run of letters and digits in which patterns find IBANs, and scanning
megabytes of it costs a second of CPU). They are counted instead, for the policy's own rule on
requests that carry media.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from itertools import islice
from typing import Any, TypeVar

from policies.pii import SCAN_LIMIT_CHARS, Abandoned

# Content parts that carry media: their data is skipped, their presence is noted.
MEDIA_PART_TYPES = frozenset(
    {"image_url", "image", "input_image", "input_audio", "audio", "file", "input_file"}
)
_DATA_URL = "data:"
_BASE64_MARK = ";base64,"
# The fields of a media part that hold its bytes (base64), whatever the part's type.
MEDIA_DATA_FIELDS = ("data", "file_data")
_DATA_FIELDS = tuple(f".{name}" for name in MEDIA_DATA_FIELDS)
_BASE64 = re.compile(r"[A-Za-z0-9+/=_\-\r\n]*")
_NAME = " (field name)"  # a field name's path: the field's path and this
# A long text is normalised this many characters at a time: NFKC holds the GIL for the whole of
# a call (a worker thread's call stalls the event loop as long), and U+FDFA grows 18-fold, at
# about 2 microseconds a character here.
_PIECE = 512
# The characters before a cut that may compose into the letter a character after it would join
# (a Hangul syllable of three jamo, a letter and its marks): Unicode composes no more deeply.
_JOINED = 8
_ESCAPE = re.compile(r"\\u([0-9A-Fa-f]{4})")
_ESCAPE_CHARS = 6  # "\\u" and four hex digits
_ESCAPED_PIECE = 8192
_STOP_EVERY = 4096  # strings walked between looks at whether the caller gave up
_T = TypeVar("_T")


class _Fold(dict[int, str | None]):
    """str.translate's table, filled as characters are met: format characters removed, decimal
    digits of any script to ASCII (a table of every code point would take a second to build)."""

    def __missing__(self, code: int) -> str | None:
        char = chr(code)
        category = unicodedata.category(char)
        folded: str | None = char
        if 0xE0020 <= code <= 0xE007E:  # a tag character, read by models as its ASCII twin
            folded = chr(code - 0xE0000)
        elif category == "Cf":
            folded = None
        elif category == "Nd":
            folded = str(unicodedata.decimal(char))
        self[code] = folded
        return folded


_FOLD = _Fold()


def normalized(text: str, limit: int | None = None) -> str:
    """`text` as the detectors read it. ASCII text is returned as it is (nothing to do), once
    its JSON escapes are read. A long text is normalised a piece at a time, each cut where NFKC
    treats both sides apart, so the result is the same as the whole text's; with `limit`, only
    until it is longer than `limit` characters (past a scan's cap, text counts as found and need
    not be read)."""
    if "\\u" in text:
        text = unescaped(text, limit)
    if text.isascii():
        return text
    if len(text) <= _PIECE:
        return _normal(text)
    forms: list[str] = []
    size = start = 0
    while start < len(text) and (limit is None or size <= limit):
        end = _cut(text, start, start + _PIECE)
        forms.append(form := _normal(text[start:end]))
        size += len(form)
        start = end
    return "".join(forms)


def unescaped(text: str, limit: int | None = None) -> str:
    """`text` with its JSON `\\uXXXX` escapes read as the characters they stand for, as a
    model reads them: a tool's result dumped as JSON with every non-ASCII letter escaped
    ("\\u5ca1\\u90e8") holds the name it spells. Escapes of quotes, backslashes and control
    characters stay (the text may be JSON a client sends on: it must stay valid); surrogate
    pairs join, a lone one reads as U+FFFD. A piece at a time, none ending inside an escape."""
    forms: list[str] = []
    size = start = 0
    while start < len(text) and (limit is None or size <= limit):
        end = min(len(text), start + _ESCAPED_PIECE)
        if end < len(text):
            inside = text.rfind("\\", end - _ESCAPE_CHARS, end)
            end = inside if inside > start else end
        forms.append(form := _ESCAPE.sub(_escaped_char, text[start:end]))
        size += len(form)
        start = end
    joined = "".join(forms)  # past `limit`, the rest is left out: over the cap, it counts as found
    if any(0xD800 <= ord(char) <= 0xDFFF for char in joined if char > "\ud7ff"):
        return joined.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return joined


def _escaped_char(match: re.Match[str]) -> str:
    code = int(match.group(1), 16)
    return match.group(0) if code < 0x20 or code in (0x22, 0x5C) else chr(code)


def _normal(text: str) -> str:
    return unicodedata.normalize("NFKC", text).translate(_FOLD)


def _cut(text: str, start: int, end: int) -> int:
    """Where to end the piece of `text` from `start`, at `end` or a little before: before a
    character NFKC joins to nothing before it. Among 64 characters there is one but in
    contrived text (a run of combining marks); then the piece ends at `end` all the same."""
    if end >= len(text):
        return len(text)
    for at in range(end, max(start + 1, end - 64), -1):
        if _apart(text[max(start, at - _JOINED) : at], text[at]):
            return at
    return end


def _apart(before: str, char: str) -> bool:
    """NFKC treats `before` and what follows from `char` on apart: `char` decomposes to a
    starter (no mark is reordered across it, and none after it joins a letter before it), and
    it joins nothing in `before` (a Hangul vowel or final, a few vowel signs: onto the letter
    the characters before it compose to)."""
    if char.isascii():
        return True
    if unicodedata.combining(unicodedata.normalize("NFKD", char)[:1]):
        return False
    nfkc = unicodedata.normalize
    return nfkc("NFKC", before + char) == nfkc("NFKC", before) + nfkc("NFKC", char)


@dataclass(frozen=True)
class Payload:
    texts: tuple[str, ...]  # normalised; past the cap no more (then over it in all)
    carries_media: bool  # media data (base64 fields, data URLs), not read
    read: dict[str, Any] = field(repr=False, compare=False)  # the body as read (no model)

    @cached_property
    def paths(self) -> tuple[str, ...]:
        """Where each text sits (a field name: its field's path + _NAME). Found again when a
        reason must name a place: most requests never need one, and paths cost a string each."""
        return tuple(path for path, _, is_media in _walk(self.read, True) if not is_media)

    def paths_of(
        self, indexes: Collection[int], stop: threading.Event | None = None
    ) -> dict[int, str]:
        """The paths of the texts at `indexes`, found in one walk that ends at the last of them
        (to name where a detector fired, not a path per string of the body)."""
        if not indexes:
            return {}
        if "paths" in self.__dict__:  # already found, all of them
            return {index: self.paths[index] for index in indexes}
        texts = (path for path, _, is_media in _walk(self.read, True) if not is_media)
        return {
            index: path
            for index, path in enumerate(islice(_checked(texts, stop), max(indexes) + 1))
            if index in indexes
        }

    @cached_property
    def media(self) -> tuple[str, ...]:
        """The paths of media data."""
        if not self.carries_media:
            return ()
        return tuple(path for path, _, is_media in _walk(self.read, True) if is_media)


def payload_of(
    body: dict[str, Any], limit: int = SCAN_LIMIT_CHARS, stop: threading.Event | None = None
) -> Payload:
    """The body's texts, normalised, until they pass `limit` characters in all (then the
    texts hold more than `limit` characters, and the rest are left out); media noted in the
    whole body. `stop`: once set, the walk raises Abandoned (its caller gave up on it)."""
    read = {k: v for k, v in body.items() if k != "model"}
    texts: list[str] = []
    media = False
    room = limit
    for _, text, is_media in _checked(_walk(read, False), stop):
        if is_media:
            media = True
        elif room >= 0:
            texts.append(form := normalized(text, room))
            room -= len(form)
    return Payload(tuple(texts), media, read)


def _checked(items: Iterator[_T], stop: threading.Event | None) -> Iterator[_T]:
    """`items`, raising Abandoned once `stop` is set (looked at every few thousand items)."""
    return items if stop is None else _watched(items, stop)


def _watched(items: Iterator[_T], stop: threading.Event) -> Iterator[_T]:
    for count, item in enumerate(items):
        if not count % _STOP_EVERY and stop.is_set():
            raise Abandoned
        yield item


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
            data = in_media and where.endswith(_DATA_FIELDS) and is_base64(item)
            yield where, item, data or is_data_url(item)
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
    """A data URL whose data is base64 (only that is media: "data:x;base64, my card is ..."
    is text, and was skipped by the detectors so)."""
    if not text.startswith(_DATA_URL):
        return False
    mark = text.find(_BASE64_MARK, 0, 256)
    return mark >= 0 and is_base64(text, mark + len(_BASE64_MARK))


def is_base64(text: str, start: int = 0) -> bool:
    """Only base64's letters (either alphabet, padding, line breaks) from `start` on: linear."""
    return _BASE64.fullmatch(text, start) is not None
