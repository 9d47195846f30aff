"""The built-in detectors of personal data, and the scan of a request's texts (pure).

DETECTORS names every detector a policy may switch on and map to a level: e-mail addresses
and IP addresses here; phone numbers in policies/phones.py; card, IBAN and SSN numbers in
policies/numbers.py; national IDs, passport numbers and birth dates in policies/identifiers.py;
credentials in policies/secrets.py; record numbers (patient, customer, plate ...) by their label
in policies/records.py; devices' identifiers in policies/devices.py. Each finds candidates with a
pattern and confirms them where a checksum or a context word exists, so order numbers and
version strings are not taken for personal data. Detection can only make a request stricter,
and a detector that fails counts as one that found something.

This runs on every request, over text a client chose, so every step is linear in the text: the
patterns run on RE2 (no backtracking; policies/re2text.py) and each loop over candidates resumes
where the last one ended. A request is scanned up to SCAN_LIMIT_CHARS characters in all. Past
that, the rest is not scanned and every enabled detector counts as fired: a request cannot slip
past the detectors, to a cloud its privacy level would forbid, by being long.

The texts of a request are scanned as one (joined by a separator no pattern takes), one search
per detector however many strings the body holds; where a detector first fired is read from its
first find's offset in that one text. A scan run for a caller that may give up on it (past a
deadline) looks at a stop flag between searches and stops there.
"""

from __future__ import annotations

import ipaddress
import logging
import threading
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, chain, islice

from policies import addresses, devices, identifiers, numbers, phones, records, secrets
from policies.re2text import (
    Finder,
    compile_unicode,
    detector_of,
    spans,
    to_bytes,
)
from policies.reserved import documentation_ip, reserved_address
from policies.spelled import respelled

log = logging.getLogger("overspill")

SCAN_LIMIT_CHARS = 1_000_000
SEPARATOR = "\x00"  # between the texts of one request, scanned as one

_EMAIL = compile_unicode(r"([A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,})")
# Only the shapes ipaddress accepts (octets 0-255 without leading zeros; eight groups, or fewer
# around one "::", with at most 7 colons as the lookaround pattern allowed), so a run of
# near-misses costs no Python; ipaddress still has the last word.
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])"
_IPV4 = compile_unicode(rf"(?:^|[^\d.])((?:{_OCTET}\.){{3}}{_OCTET})(?:[^\d.]|$)")
_HEX = r"[0-9A-Fa-f]{1,4}"
_IPV6_FORMS = (
    rf"(?:{_HEX}:){{7}}{_HEX}",  # eight groups
    rf"(?:{_HEX}:){{1,6}}:",  # n groups, then ::
    *(rf"(?:{_HEX}:){{1,{7 - n}}}(?::{_HEX}){{1,{n}}}" for n in range(1, 7)),  # a::b, a + b <= 7
    rf":(?:(?::{_HEX}){{1,6}}|:)",  # :: then n groups, or :: alone
)
_IPV6 = compile_unicode(rf"(?:^|[^\w:])({'|'.join(_IPV6_FORMS)})(?:[^\w:]|$)")


def _emails(data: bytes) -> Iterator[tuple[int, int]]:
    return (
        (start, end)
        for start, end in spans(_EMAIL, data)
        if not _in_url_authority(data, start) and not reserved_address(data[start:end])
    )


def _in_url_authority(data: bytes, start: int) -> bool:
    """user:password@host in a URL is a credential (the secret detector's), not an address: a
    "://" earlier in the same word (looked for in the 256 bytes before, so the scan stays
    linear)."""
    before = data[max(0, start - 256) : start]
    word = before.rsplit(None, 1)[-1] if before.strip() else b""
    return b"://" in word and b":" in word.split(b"://", 1)[1]


def _ips(data: bytes) -> Iterator[tuple[int, int]]:
    v4 = ((s, e) for s, e in spans(_IPV4, data) if not _versioned(data[max(0, s - 24) : s]))
    for start, end in chain(v4, spans(_IPV6, data)):
        try:
            address = ipaddress.ip_address(data[start:end].decode())
        except ValueError:
            continue
        if not documentation_ip(address):
            yield start, end


def _versioned(before: bytes) -> bool:
    """A dotted quad just after a word that announces a version ("version 2.10.0.4", "v2.10.0.4",
    "release 1.2.3.4") is a version number, not an address."""
    stripped = (word.strip(b"\"'{}[](),;:=#\x00") for word in before.lower().split())
    words = [word for word in stripped if word]
    if any(b"version" in word for word in words[-2:]):  # __version__ = "...", client_version
        return True
    if len(words) >= 2 and words[-2] in _VERSION_WORDS:  # "upgrading to 2.10.0.4"
        return True
    last = words[-1] if words else b""
    if last.endswith(b"v"):  # "v1.2.3.4", "==v1.2.3.4", "versionv"... but not "dev1.2.3.4"
        stem = last[:-1]
        return not stem[-1:].isalnum() or stem in _VERSION_WORDS
    return last in _VERSION_WORDS


_VERSION_WORDS = frozenset(
    {b"version", b"versions", b"ver", b"ver.", b"release", b"build", b"firmware", b"patch"}
    | {b"update", b"upgrade", b"downgrade", b"tag", b"updating", b"upgrading", b"updated"}
    | {b"upgraded", b"installed", b"latest", b"current", b"released"}
)


# Each finder yields where, in a text's UTF-8 bytes, it finds what it looks for (for redaction);
# each detector says whether it finds anything (for the level).
FINDERS: dict[str, Finder] = {
    "email": _emails,
    "phone": phones.phones,
    "payment_card": numbers.cards,
    "us_ssn": numbers.ssns,
    "iban": numbers.ibans,
    "ip_address": _ips,
    "secret": secrets.secrets,
    "national_id": identifiers.national_ids,
    "passport": identifiers.passports,
    "date_of_birth": identifiers.dates_of_birth,
    "street_address": addresses.street_addresses,
    "record_number": records.record_numbers,
    "device_id": devices.device_ids,
}
DETECTORS: dict[str, Callable[[str], bool]] = {n: detector_of(f) for n, f in FINDERS.items()}


class Abandoned(Exception):
    """The scan's caller gave up on it (past its deadline): raised at the scan's next step."""


@dataclass(frozen=True)
class Scan:
    """What the enabled detectors say about a request's texts, in DETECTORS order."""

    detected: tuple[str, ...]  # fired on the text scanned
    unscanned: tuple[str, ...]  # the others, when text went past the limit: they count as fired
    limit: int
    # detector -> index (in the texts given) of the text it first fired in, when located
    first: Mapping[str, int] = field(default_factory=dict, compare=False)

    @property
    def fired(self) -> list[str]:
        return [name for name in DETECTORS if name in self.detected or name in self.unscanned]


def scan(
    texts: Iterable[str],
    enabled: Iterable[str],
    limit: int = SCAN_LIMIT_CHARS,
    *,
    locate: bool = False,
    stop: threading.Event | None = None,
) -> Scan:
    """Run the enabled detectors over the first `limit` characters of `texts` (empty ones
    skipped); when there were more, every enabled detector that did not fire is `unscanned`.
    `locate`: say which text each detector first fired in (Scan.first). `stop`: once set, the
    scan raises Abandoned before its next search."""
    wanted = set(enabled)
    names = [name for name in DETECTORS if name in wanted]
    texts = tuple(texts)
    scanned, beyond = _within(texts, limit) if names else ([], False)
    # One search per detector over all the texts: a body of a million one-letter strings must
    # not cost a million calls each. No pattern takes the separator, and every boundary does.
    joined = SEPARATOR.join(scanned)
    # Read again as a model reads it where something is spelled out ("jsmith at gmail dot
    # com", "five five five ..."): a finding in either counts (no separator is spelled).
    spelled = respelled(joined) if joined else None
    detected = []
    for name in names:
        _go_on(stop)
        if joined and (fires(name, joined) or (spelled is not None and fires(name, spelled))):
            detected.append(name)
    unscanned = tuple(name for name in names if name not in detected) if beyond else ()
    first = _located(detected, joined, scanned, texts, stop) if locate else {}
    return Scan(tuple(detected), unscanned, limit, first)


def _go_on(stop: threading.Event | None) -> None:
    if stop is not None and stop.is_set():
        raise Abandoned


def fires(name: str, text: str) -> bool:
    """Fail closed: a detector that fails counts as one that found something (the request is
    kept from where a detection would forbid it, never sent unchecked)."""
    try:
        return DETECTORS[name](text)
    except Exception:
        log.exception("detector %s failed: counted as a detection", name)
        return True


def detect(
    texts: Iterable[str], enabled: Iterable[str], limit: int = SCAN_LIMIT_CHARS
) -> list[str]:
    """Names of the enabled detectors that fire on any of `texts`, in DETECTORS order; all of them
    when the texts are longer than `limit` characters in all."""
    return scan(texts, enabled, limit).fired


def _within(texts: Sequence[str], limit: int) -> tuple[list[str], bool]:
    """The non-empty texts, cut off after `limit` characters in all; and whether any was cut."""
    if sum(map(len, texts)) <= limit:  # most requests: counted and kept in C
        return list(filter(None, texts)), False
    kept: list[str] = []
    room = limit
    for text in texts:
        if len(text) > room:
            return [*kept, text[:room]] if room else kept, True
        if text:
            kept.append(text)
            room -= len(text)
    return kept, False


def _located(
    names: Sequence[str],
    joined: str,
    scanned: Sequence[str],
    texts: Sequence[str],
    stop: threading.Event | None,
) -> dict[str, int]:
    """Per detector in `names` (each fired on `joined`), the index in `texts` of the text its
    first find begins in: one more search each, ending at that find, never one per text."""
    data = to_bytes(joined)
    ends = list(accumulate(map(len, scanned)))  # scanned[k] ends at ends[k] + k in `joined`
    first: dict[str, int] = {}
    for name in names:
        _go_on(stop)
        start = _first_find(name, data)
        if start is None:
            continue
        # the offset in characters (RE2 gives bytes); a separator counts with the next text
        offset = start if len(data) == len(joined) else len(data[:start].decode(errors="replace"))
        kept = bisect_right(range(len(ends)), offset, key=lambda k: ends[k] + k)
        first[name] = _index_in(texts, min(kept, len(scanned) - 1), len(scanned))
    return first


def _first_find(name: str, data: bytes) -> int | None:
    """Where the detector's finder first finds something (None if it finds nothing, or fails:
    the detection stands, unlocated)."""
    try:
        found = next(FINDERS[name](data), None)
    except Exception:
        log.exception("detector %s failed to locate what it found", name)
        return None
    return None if found is None else found[0]


def _index_in(texts: Sequence[str], kept: int, scanned: int) -> int:
    """The index in `texts` of the `kept`-th non-empty one (of the first `scanned` of those)."""
    if all(texts[:scanned]):  # no empty text among them: the same index
        return kept
    return next(islice((i for i, text in enumerate(texts) if text), kept, None))
