"""Redaction: personal data replaced by typed placeholders in what leaves, and the placeholders
replaced back by the values in what comes back (pure).

The same value always gets the same placeholder within a request (`<EMAIL_1>` twice for one
address written twice), so the model can still tell who is who. Restoring a stream never holds
an answer back: text flows as it comes, and only a tail that could be the start of a placeholder
("<EMA", split across two chunks) waits for the next chunk, at most MAX_PLACEHOLDER characters.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from policies.payload import (
    MEDIA_DATA_FIELDS,
    is_data_url,
    is_media_part,
    normalized,
    payload_of,
)
from policies.pii import FINDERS, SCAN_LIMIT_CHARS, scan
from policies.re2text import to_bytes
from policies.spelled import respelled

# "<" + a kind in capitals + "_" + a number + ">", the longest it may be.
MAX_PLACEHOLDER = 40
# The re module, on answers: a pattern of bounded repeats backtracks a few dozen steps at most
# from each "<", and finds 32,000 placeholders in 4 ms where the RE2 wrapper, converting
# offsets in a str back to characters match by match, takes 170 ms.
_PLACEHOLDER = re.compile(r"<[A-Z][A-Z_]{0,30}_[0-9]{1,6}>")


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
        """Every known placeholder in `text` back to its value (unknown ones stay as written),
        in one pass (a search per placeholder from where the last ended read the text again
        each time through the RE2 wrapper: quadratic)."""
        if "<" not in text or not self.values:
            return text
        pieces: list[str] = []
        pos = 0
        for match in _PLACEHOLDER.finditer(text):
            start, end = match.span()
            placeholder = text[start:end]
            if placeholder in self.values:
                pieces += (text[pos:start], self.values[placeholder])
                pos = end
        pieces.append(text[pos:])
        return "".join(pieces)


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
    return Written(values).spans(to_bytes(text))


class Written:
    """Where any of many values is written, in one pass over a text whatever their number
    (Aho-Corasick on bytes): a search per value cost values x text. Every occurrence counts,
    overlapping ones too; at each byte, the longest value that ends there is reported (the
    shorter ones lie inside it), with the first kind it was given."""

    def __init__(self, values: Mapping[str, Sequence[bytes]]) -> None:
        self._next: dict[int, int] = {}  # state << 8 | byte -> state (state 0: nothing read)
        self._fail = [0]  # the state of the longest proper suffix that is a prefix too
        self._longest = [0]  # the longest value that ends the state's bytes (0: none)
        self._kind = [""]
        children: list[list[tuple[int, int]]] = [[]]
        for kind, kind_values in values.items():
            for value in kind_values:
                self._add(kind, value, children)
        self._link(children)
        # the bytes a value begins with, found by the re module in C between matches (a
        # character class: no backtracking)
        firsts = bytes(sorted({byte for byte, _ in children[0]}))
        self._first = re.compile(b"[" + re.escape(firsts) + b"]" if firsts else b"(?!)")

    def _add(self, kind: str, value: bytes, children: list[list[tuple[int, int]]]) -> None:
        state = 0
        for byte in value:
            key = state << 8 | byte
            if key not in self._next:
                self._next[key] = len(self._fail)
                children[state].append((byte, len(self._fail)))
                self._fail.append(0)
                self._longest.append(0)
                self._kind.append("")
                children.append([])
            state = self._next[key]
        if value and not self._longest[state]:
            self._longest[state], self._kind[state] = len(value), kind

    def _link(self, children: list[list[tuple[int, int]]]) -> None:
        """Failure links, breadth first; a state with no value of its own reports its
        suffix's."""
        queue = deque(child for _, child in children[0])
        while queue:
            state = queue.popleft()
            for byte, child in children[state]:
                self._fail[child] = fallback = self._step(self._fail[state], byte)
                if not self._longest[child]:
                    self._longest[child] = self._longest[fallback]
                    self._kind[child] = self._kind[fallback]
                queue.append(child)

    def _step(self, state: int, byte: int) -> int:
        while (following := self._next.get(state << 8 | byte)) is None and state:
            state = self._fail[state]
        return following or 0

    def spans(self, data: bytes) -> list[Span]:
        """The places, overlapping ones merged as redacted() merges them (one placeholder,
        the kind of the one that starts first): a run of overlapping occurrences is one span,
        not one per byte."""
        merged: list[tuple[int, int, str]] = []
        state, at, size = 0, 0, len(data)
        while at < size:
            if not state:  # nothing under way: on to the next byte a value begins with
                match = self._first.search(data, at)
                if match is None:
                    break
                at = match.start()
            state = self._step(state, data[at])
            at += 1
            if length := self._longest[state]:
                start, kind = at - length, self._kind[state]
                while merged and start < merged[-1][1]:
                    before = merged.pop()
                    if before[0] < start:
                        start, kind = before[0], before[2]
                merged.append((start, at, kind))
        return [Span(*place) for place in merged]


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
    values_in = Written(known)  # built once for all the texts
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
            spans = found(text, names) + values_in.spans(to_bytes(text))
            if spans and is_key:
                raise NotRedactable("personal data in a field name")
            if (spelled := respelled(text)) is not None and found(spelled, names):
                raise NotRedactable("personal data spelled out (no placeholder can stand in)")
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
