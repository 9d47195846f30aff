"""bench/privacy_corpus.py: the labelled corpus loads, is as broad as promised, splits the same
way every time, and the scores count what they say."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bench.privacy_corpus import CLASSES, Case, clean_flagged, load, scores


@pytest.fixture(scope="module")
def corpus() -> list[Case]:
    return load()


def test_the_corpus_is_as_broad_as_the_issue_asks(corpus: list[Case]) -> None:
    assert len(corpus) >= 300
    carried = Counter(label for case in corpus for label in case.labels)
    assert all(carried[name] >= 15 for name in CLASSES), carried
    assert sum(1 for case in corpus if case.near_miss_of and not case.labels) >= 120
    shapes = Counter(case.shape for case in corpus)
    assert len(shapes) >= 12
    assert min(shapes.values()) >= 8, shapes


def test_both_halves_hold_every_class(corpus: list[Case]) -> None:
    for half in ("tune", "held"):
        carried = Counter(label for c in corpus if c.half == half for label in c.labels)
        assert all(carried[name] >= 4 for name in CLASSES), (half, carried)


def test_the_split_depends_on_the_id_alone() -> None:
    one = Case("email-chat-01", "chat", {}, frozenset())
    again = Case("email-chat-01", "tools", {"x": 1}, frozenset({"email"}))
    assert one.half == again.half
    halves = Counter(Case(f"case-{i}", "chat", {}, frozenset()).half for i in range(1000))
    assert 400 < halves["held"] < 600


def case(id_: str, labels: set[str]) -> Case:
    return Case(id_, "chat", {"text": id_}, frozenset(labels))


def test_scores_count_found_missed_and_flagged_without() -> None:
    cases = [case("a", {"email"}), case("b", {"email"}), case("c", set()), case("d", {"phone"})]
    said = {"a": {"email"}, "b": set(), "c": {"email"}, "d": {"phone", "email"}}

    def detect(body: dict[str, Any]) -> set[str]:
        return said[body["text"]]

    table = scores(cases, detect)
    email = table["email"]
    assert (email.tp, email.fn, email.fp) == (1, 1, 2)
    assert (email.precision, email.recall) == (1 / 3, 1 / 2)
    assert email.missed == ["b"]
    assert table["phone"].recall == 1.0
    assert table["iban"].precision is None
    assert clean_flagged(cases, detect) == (1, 1)


def test_unknown_labels_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    line = {"id": "x", "shape": "chat", "body": {}, "labels": ["emial"], "near_miss_of": ""}
    path.write_text(json.dumps(line) + "\n")
    with pytest.raises(ValueError, match="unknown labels"):
        load(path)
