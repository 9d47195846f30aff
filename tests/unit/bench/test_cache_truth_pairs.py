"""bench/data/cache_truth_pairs.jsonl: the hand-labelled question pairs for the semantic cache
have the promised shape, breadth and a balanced tune / held_out split."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parents[3] / "bench" / "data" / "cache_truth_pairs.jsonl"

KEYS = {"id", "a", "b", "label", "domain", "kind", "split", "note"}
DOMAINS = {
    "support",
    "coding",
    "medicine",
    "law",
    "finance",
    "travel",
    "cooking",
    "science",
    "hr",
    "product",
}
PARAPHRASE_KINDS = {
    "reordering": 40,
    "synonyms": 40,
    "formality": 40,
    "typos": 40,
    "politeness": 40,
}
NEAR_MISS_KINDS = {
    "noun_swap": 30,
    "number": 30,
    "negation": 30,
    "entity": 30,
    "time": 30,
    "comparative_superlative": 30,
    "unit": 30,
    "language": 30,
}
KINDS_BY_LABEL = {"paraphrase": PARAPHRASE_KINDS, "near_miss": NEAR_MISS_KINDS}
SPLITS = {"tune", "held_out"}

Pair = dict[str, str]


@pytest.fixture(scope="module")
def pairs() -> list[Pair]:
    lines = PATH.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_every_line_has_exactly_the_keys_as_strings(pairs: list[Pair]) -> None:
    for pair in pairs:
        assert set(pair) == KEYS, pair
        assert all(isinstance(value, str) and value.strip() for value in pair.values()), pair


def test_labels_domains_and_splits_come_from_the_known_sets(pairs: list[Pair]) -> None:
    for pair in pairs:
        assert pair["label"] in KINDS_BY_LABEL, pair["id"]
        assert pair["domain"] in DOMAINS, pair["id"]
        assert pair["split"] in SPLITS, pair["id"]


def test_each_kind_belongs_to_its_own_label(pairs: list[Pair]) -> None:
    for pair in pairs:
        assert pair["kind"] in KINDS_BY_LABEL[pair["label"]], pair["id"]


def test_ids_are_unique(pairs: list[Pair]) -> None:
    ids = Counter(pair["id"] for pair in pairs)
    assert [id_ for id_, seen in ids.items() if seen > 1] == []


def test_the_two_questions_of_a_pair_differ(pairs: list[Pair]) -> None:
    assert [pair["id"] for pair in pairs if pair["a"] == pair["b"]] == []


def test_no_pair_is_repeated_in_either_order(pairs: list[Pair]) -> None:
    seen: dict[frozenset[str], str] = {}
    for pair in pairs:
        key = frozenset((pair["a"], pair["b"]))
        assert key not in seen, (pair["id"], seen.get(key))
        seen[key] = pair["id"]


def test_the_set_is_large_and_every_domain_holds_both_labels(pairs: list[Pair]) -> None:
    assert len(pairs) >= 640
    per_domain = Counter(pair["domain"] for pair in pairs)
    assert set(per_domain) == DOMAINS
    assert min(per_domain.values()) >= 60, per_domain
    per_label = Counter((pair["domain"], pair["label"]) for pair in pairs)
    for domain in DOMAINS:
        for label in KINDS_BY_LABEL:
            assert per_label[domain, label] >= 25, (domain, label, per_label[domain, label])


def test_each_kind_is_used_at_least_its_minimum(pairs: list[Pair]) -> None:
    used = Counter(pair["kind"] for pair in pairs)
    for minimums in KINDS_BY_LABEL.values():
        for kind, least in minimums.items():
            assert used[kind] >= least, (kind, used[kind])


def test_the_halves_are_balanced_and_cover_every_domain_and_kind(pairs: list[Pair]) -> None:
    total = len(pairs)
    all_kinds = set(PARAPHRASE_KINDS) | set(NEAR_MISS_KINDS)
    for split in SPLITS:
        half = [pair for pair in pairs if pair["split"] == split]
        assert 0.45 * total <= len(half) <= 0.55 * total, (split, len(half))
        assert {pair["domain"] for pair in half} == DOMAINS, split
        assert {pair["kind"] for pair in half} == all_kinds, split
