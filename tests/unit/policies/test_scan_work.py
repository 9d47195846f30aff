"""What the privacy scan costs, counted rather than timed (issue 30): one search per detector
however many strings a body holds, where a detector fired read from that search, text
normalised only up to the scan's cap and in bounded pieces, and a scan its caller gave up on
stopping at its next step."""

from __future__ import annotations

import threading
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies import payload as payload_module
from policies.model import Privacy, PrivacyLevel
from policies.payload import normalized, payload_of
from policies.pii import DETECTORS, FINDERS, SCAN_LIMIT_CHARS, Abandoned, scan
from policies.privacy import classify

ALL = tuple(DETECTORS)
PRIVACY = Privacy(
    (PrivacyLevel("public"), PrivacyLevel("internal")), "public", dict.fromkeys(ALL, "internal")
)
PERSONAL = "call +1 415 555 0100 or mail jane.doe@exemplo.com"


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Every detector's and every finder's calls, counted (the real ones still answer)."""
    counted: Counter[str] = Counter()

    def detector(name: str, real: Callable[[str], bool]) -> Callable[[str], bool]:
        def counting(text: str) -> bool:
            counted[f"detector {name}"] += 1
            return real(text)

        return counting

    def finder(
        name: str, real: Callable[[bytes], Iterator[tuple[int, int]]]
    ) -> Callable[[bytes], Iterator[tuple[int, int]]]:
        def counting(data: bytes) -> Iterator[tuple[int, int]]:
            counted[f"finder {name}"] += 1
            return real(data)

        return counting

    for name in ALL:
        monkeypatch.setitem(DETECTORS, name, detector(name, DETECTORS[name]))
        monkeypatch.setitem(FINDERS, name, finder(name, FINDERS[name]))
    return counted


def test_where_personal_data_sits_among_many_strings_costs_no_search_per_string(
    calls: Counter[str],
) -> None:
    """The audit's body: a thousand one-character strings, then one with personal data. Naming
    where each detector fired took a detector call per string before it (1,720 ms at 13,000)."""
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "x": ["1"] * 1000}
    body["x"].append(PERSONAL)
    result = classify(PRIVACY, header=None, body=body, tenant=None)
    assert result.reasons == (
        "detected email in x[1000]: internal",
        "detected phone in x[1000]: internal",
    )
    assert calls == Counter(
        {**{f"detector {name}": 1 for name in ALL}, "finder email": 1, "finder phone": 1}
    )


def test_a_request_with_nothing_personal_calls_each_detector_once_and_no_finder(
    calls: Counter[str],
) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "x": ["1"] * 1000}
    assert classify(PRIVACY, header=None, body=body, tenant=None).reasons == (
        "policy default: public",
    )
    assert calls == Counter({f"detector {name}": 1 for name in ALL})


# --- where a detector first fired ---------------------------------------------------------

_QUIET = st.text(alphabet="abcé中 .,\n", max_size=12)


@settings(deadline=None, max_examples=200)
@given(
    before=st.lists(_QUIET, max_size=8),
    after=st.lists(st.one_of(_QUIET, st.just(PERSONAL)), max_size=4),
)
def test_where_a_detector_first_fired_is_the_first_text_it_finds_something_in(
    before: list[str], after: list[str]
) -> None:
    """Empty texts (skipped by the scan), non-ASCII ones (offsets in bytes, not characters) and
    later finds do not move the index named."""
    texts = [*before, PERSONAL, *after]
    found = scan(texts, ["email", "phone"], locate=True)
    assert found.first == {"email": len(before), "phone": len(before)}


def test_a_scan_not_asked_to_locate_runs_no_finder(calls: Counter[str]) -> None:
    assert scan([PERSONAL], ["email"]).first == {}
    assert calls == Counter({"detector email": 1})


# --- normalising up to the cap, in pieces -------------------------------------------------


@pytest.fixture
def normalised(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The length of every text NFKC is asked to normalise."""
    lengths: list[int] = []
    real = unicodedata.normalize

    def counting(form: str, text: str) -> str:
        if form == "NFKC":
            lengths.append(len(text))
        return real(form, text)

    monkeypatch.setattr(payload_module.unicodedata, "normalize", counting)
    return lengths


def test_a_body_nfkc_expands_is_normalised_only_as_far_as_the_cap(normalised: list[int]) -> None:
    """U+FDFA is 18 characters once normalised: 200,000 of them (600 KB) would be 3.6 million,
    expanded whole before the cap applied. Now about 1/18 of the cap is read, 512 at a time."""
    body = {"model": "m", "messages": [{"role": "user", "content": "\ufdfa" * 200_000}]}
    texts = payload_of(body).texts
    assert SCAN_LIMIT_CHARS < sum(map(len, texts)) <= SCAN_LIMIT_CHARS + 18 * 512
    pieces = [length for length in normalised if length > 16]  # not the cuts' short checks
    assert sum(pieces) <= SCAN_LIMIT_CHARS // 18 + 512
    assert max(pieces) <= 512  # no call holds the GIL long
    beyond = classify(PRIVACY, header=None, body=body, tenant=None)
    assert beyond.level == "internal"
    assert all("beyond the scan limit" in reason for reason in beyond.reasons)


def test_the_texts_after_the_cap_are_neither_normalised_nor_kept(normalised: list[int]) -> None:
    body = {"model": "m", "x": ["é" * 100] * 50, "y": ["é" * 100] * 50}
    texts = payload_of(body, limit=1000).texts
    assert texts == ("x", *["é" * 100] * 10)  # the field's name, and the string past the cap
    assert normalised == [100] * 10


# The characters NFKC composes or reorders across a cut (Hangul jamo, combining marks, vowel
# signs that join the letter before them), some it expands, format characters it drops.
_TRICKY = st.sampled_from(
    [
        *"\u1100\u1161\u11a8\u0301\u0323\u0302\u3099\u0b3e\u0bbe\u0cd5\u0f73\u0344",
        *"\ufdfa\uff11\u200b\u00ad가aé ",
        "e\u0323\u0302",
        "\u110e\u1169\u11b0",
    ]
)


@settings(deadline=None, max_examples=100)
@given(st.lists(_TRICKY, min_size=300, max_size=1500))
def test_a_text_normalised_in_pieces_reads_as_the_whole_would(parts: list[str]) -> None:
    text = "".join(parts)
    whole = unicodedata.normalize("NFKC", text).translate(payload_module._FOLD)
    assert normalized(text) == whole
    assert whole.startswith(normalized(text, limit=100))


# --- a scan its caller gave up on stops ---------------------------------------------------


def test_a_scan_told_to_stop_runs_no_further_detector(monkeypatch: pytest.MonkeyPatch) -> None:
    stop = threading.Event()
    ran: list[str] = []

    def giving_up(text: str) -> bool:  # the first detector runs as the caller gives up
        ran.append("email")
        stop.set()
        return False

    monkeypatch.setitem(DETECTORS, "email", giving_up)
    for name in ALL[1:]:
        monkeypatch.setitem(DETECTORS, name, lambda text, name=name: bool(ran.append(name)))
    with pytest.raises(Abandoned):
        scan(["nothing personal"], ALL, stop=stop)
    assert ran == ["email"]


def test_a_walk_told_to_stop_ends_within_a_few_thousand_strings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stop = threading.Event()
    seen: list[str] = []
    real = unicodedata.normalize

    def giving_up(form: str, text: str) -> str:  # the caller gives up at the 5,000th string
        seen.append(text)
        if len(seen) == 5000:
            stop.set()
        return real(form, text)

    monkeypatch.setattr(payload_module.unicodedata, "normalize", giving_up)
    with pytest.raises(Abandoned):
        payload_of({"x": ["é"] * 100_000}, stop=stop)
    assert 5000 <= len(seen) <= 5000 + 4096
