"""Redaction: personal data replaced by typed placeholders in what leaves, and the placeholders
replaced back by the values in what comes back (pure).

The same value always gets the same placeholder within a request (`<EMAIL_1>` twice for one
address written twice), so the model can still tell who is who. Restoring a stream never holds
an answer back: text flows as it comes, and only a tail that could be the start of a placeholder
("<EMA", split across two chunks) waits for the next chunk, at most MAX_PLACEHOLDER characters.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import re2  # type: ignore[import-untyped]

from policies.payload import (
    MEDIA_DATA_FIELDS,
    is_data_url,
    is_media_part,
    normalized,
    payload_of,
)
from policies.pii import FINDERS, SCAN_LIMIT_CHARS, scan
from policies.re2text import to_bytes

# "<" + a kind in capitals + "_" + a number + ">", the longest it may be.
MAX_PLACEHOLDER = 40
_PLACEHOLDER = re2.compile(r"<[A-Z][A-Z_]{0,30}_[0-9]{1,6}>")


@dataclass
class Placeholders:
    """The placeholders of one request: value -> placeholder, and back."""

    by_value: dict[tuple[str, str], str] = field(default_factory=dict)
    values: dict[str, str] = field(default_factory=dict)
    _counts: dict[str, int] = field(default_factory=dict)

    def of(self, kind: str, value: str) -> str:
        key = (kind, value)
        if key not in self.by_value:
            number = self._counts[kind] = self._counts.get(kind, 0) + 1
            placeholder = f"<{kind.upper()}_{number}>"
            self.by_value[key] = placeholder
            self.values[placeholder] = value
        return self.by_value[key]

    def restore(self, text: str) -> str:
        """Every known placeholder in `text` back to its value (unknown ones stay as written)."""
        if "<" not in text or not self.values:
            return text
        pieces: list[str] = []
        pos = 0
        for found in _matches(text):
            start, end = found
            placeholder = text[start:end]
            if placeholder in self.values:
                pieces += (text[pos:start], self.values[placeholder])
                pos = end
        pieces.append(text[pos:])
        return "".join(pieces)


def _matches(text: str) -> Iterable[tuple[int, int]]:
    pos = 0
    while (found := _PLACEHOLDER.search(text, pos)) is not None:
        yield found.span()
        pos = found.end()


@dataclass(frozen=True)
class Span:
    start: int  # byte offsets in the text's UTF-8 (where the finders find)
    end: int
    kind: str  # the detector that found it


def found(text: str, enabled: Iterable[str]) -> list[Span]:
    """Every span the enabled detectors find in `text` (read as the proxy reads it)."""
    data = to_bytes(text)
    wanted = set(enabled)
    return [
        Span(start, end, name)
        for name, finder in FINDERS.items()
        if name in wanted
        for start, end in finder(data)
    ]


def written(text: str, values: Mapping[str, Sequence[bytes]]) -> list[Span]:
    """Every place one of `values` (kind -> UTF-8 values) is written in `text`."""
    data = to_bytes(text)
    spans = []
    for kind, kind_values in values.items():
        for value in kind_values:
            start = data.find(value)
            while start >= 0:
                spans.append(Span(start, start + len(value), kind))
                start = data.find(value, start + len(value))
    return spans


def redacted(text: str, spans: Iterable[Span], placeholders: Placeholders) -> str:
    """`text` with each span replaced by its placeholder; overlapping spans merge into the
    first one's kind (the text they cover leaves as one placeholder, never in part)."""
    merged: list[Span] = []
    for span in sorted(spans, key=lambda s: (s.start, -s.end)):
        if merged and span.start < merged[-1].end:
            last = merged[-1]
            merged[-1] = Span(last.start, max(last.end, span.end), last.kind)
        else:
            merged.append(span)
    data = to_bytes(text)
    pieces: list[bytes] = []
    pos = 0
    for span in merged:
        value = data[span.start : span.end].decode("utf-8", "replace")
        pieces += (data[pos : span.start], placeholders.of(span.kind, value).encode())
        pos = span.end
    pieces.append(data[pos:])
    return b"".join(pieces).decode("utf-8", "replace")


@dataclass
class Unmasker:
    """Restores placeholders in a stream of text chunks (one per choice of a streamed answer)."""

    placeholders: Placeholders
    _held: str = ""

    def feed(self, chunk: str) -> str:
        """What may be sent now: the text so far, restored, but for a tail that may be the start
        of a placeholder still arriving."""
        text = self._held + chunk
        cut = _unfinished_tail(text)
        self._held = text[cut:]
        return self.placeholders.restore(text[:cut])

    def flush(self) -> str:
        """At the end of the stream: whatever was held back, as it is (restored if whole)."""
        text, self._held = self._held, ""
        return self.placeholders.restore(text)


def _unfinished_tail(text: str) -> int:
    """Where a tail starts that could still grow into a placeholder: the last "<" after which
    only placeholder characters follow, no ">", within MAX_PLACEHOLDER; else len(text)."""
    start = text.rfind("<", max(0, len(text) - MAX_PLACEHOLDER))
    if start < 0:
        return len(text)
    tail = text[start + 1 :]
    if ">" in tail or not all(c.isupper() or c.isdigit() or c == "_" for c in tail):
        return len(text)
    return start


class NotRedactable(Exception):
    """What a request carries cannot all be redacted (a field name holds personal data, or the
    text runs past the scan limit): it may not leave redacted either."""


def redacted_body(
    body: dict[str, Any],
    enabled: Iterable[str],
    limit: int = SCAN_LIMIT_CHARS,
    values: Mapping[str, Sequence[str]] | None = None,
) -> tuple[dict[str, Any], Placeholders]:
    """A copy of `body` whose strings (normalised as the detectors read them) carry placeholders
    where the enabled detectors found something, and wherever one of `values` (kind -> values
    the names model found, policies/entities.py) is written; the model's name is left as it
    is."""
    # One joined scan says which detectors find anything at all; only those look for where,
    # text by text (most requests carry nothing, and pay the one scan).
    scanned = scan(payload_of(body).texts, enabled, limit)
    if scanned.unscanned:
        raise NotRedactable(f"text beyond the scan limit ({limit} characters)")
    names = list(scanned.detected)
    known = {kind: [to_bytes(v) for v in found if v] for kind, found in (values or {}).items()}
    if not names and not any(known.values()):
        return body, Placeholders()
    places = Placeholders()
    budget = [limit]

    def walk(value: Any, is_key: bool = False, media: bool = False) -> Any:
        if isinstance(value, str):
            if media or is_data_url(value):
                return value  # media bytes: never read as text, and left whole
            text = normalized(value)
            budget[0] -= len(text)
            if budget[0] < 0:
                raise NotRedactable(f"text beyond the scan limit ({limit} characters)")
            spans = found(text, names) + written(text, known)
            if spans and is_key:
                raise NotRedactable("personal data in a field name")
            return redacted(text, spans, places) if spans else value
        if isinstance(value, list):
            return [walk(item) for item in value]
        if isinstance(value, dict):
            in_media = is_media_part(value)
            return {
                walk(k, is_key=True): walk(v, media=in_media and k in MEDIA_DATA_FIELDS)
                for k, v in value.items()
            }
        return value

    copy = {key: (value if key == "model" else walk(value)) for key, value in body.items()}
    return copy, places
