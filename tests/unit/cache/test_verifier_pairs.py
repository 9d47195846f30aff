"""cache/verifier_pairs.py and the training set of cache/verifier_training.py: the edits that
keep a question and those that change it, determinism, and the held-out split never read."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from cache.question_templates import TEMPLATES
from cache.verifier_pairs import (
    NEAR_MISS,
    PARAPHRASE,
    Question,
    content_words,
    edited_pairs,
    family_swapped,
    kept,
    negated,
    renumbered,
    slot_pairs,
    typo,
    word_swapped,
)
from cache.verifier_training import labelled_pairs, recipe, training_pairs


@pytest.mark.parametrize("seed", range(20))
def test_a_typo_edits_letters_of_long_words_only(seed: int) -> None:
    text = "How do I configure the firewall on Ubuntu 22.04?"
    edited = typo(text, random.Random(seed))
    assert edited != text
    before, after = text.split(" "), edited.split(" ")
    assert len(before) == len(after)
    for old, new in zip(before, after, strict=True):
        if old != new:
            assert len(old) >= 5
            assert old.isalpha()
            assert abs(len(old) - len(new)) <= 1


def test_kept_questions_keep_every_number() -> None:
    """(A name may be misspelt, as people do: "Gerrmany" is still Germany.)"""
    rng = random.Random(3)
    for _ in range(50):
        assert "500" in kept("Is a 500 MB upload allowed in Germany?", rng)


def test_a_number_changes() -> None:
    rng = random.Random(1)
    for _ in range(20):
        other = renumbered("Can I bring 2 bags of 23 kg?", rng)
        assert other is not None
        assert other != "Can I bring 2 bags of 23 kg?"
    assert renumbered("Can I bring my bag?", rng) is None


def test_a_negation_is_added_where_it_changes_the_question_or_removed() -> None:
    rng = random.Random(2)
    assert negated("Why is my build failing?", rng) == "Why is not my build failing?"
    assert negated("Can I take ibuprofen if I have eaten?", random.Random(0)) in {
        "Can I take ibuprofen if I don't have eaten?",
        "Can I take ibuprofen if I have not eaten?",
    }
    assert negated("Why is the build not failing?", rng) == "Why is the build failing?"
    assert negated("Why doesn't it start?", rng) == "Why does it start?"
    assert negated("Tell me a joke", rng) is None
    # an opening auxiliary is never negated: "Doesn't it ...?" asks what "Does it ...?" does
    assert negated("Does it work offline", rng) is None


def test_a_family_member_is_swapped_for_another() -> None:
    other = family_swapped("Can I upload a 5 GB file?", random.Random(0))
    assert other is not None
    assert " GB " not in other
    assert family_swapped("Tell me a joke", random.Random(0)) is None


def test_a_word_is_swapped_for_one_of_the_same_kind() -> None:
    pool = ["Brazil", "invoice", "Spain", "refund"]
    rng = random.Random(0)
    for _ in range(20):
        other = word_swapped("Do you ship parcels to Germany?", pool, rng)
        assert other is not None
        swapped = set(other.split()) ^ set("Do you ship parcels to Germany?".split())
        assert len(swapped) == 2
    assert content_words("How do I get a refund for my order?") == ["refund", "order"]


def test_edited_pairs_are_deterministic_and_labelled() -> None:
    questions = [
        Question("How do I get a refund for my order?", "support"),
        Question("Can I change my delivery address after ordering?", "support"),
        Question("What is 17 times 23?", "maths"),
    ]
    first, again = edited_pairs(questions), edited_pairs(questions)
    assert first == again
    assert {p.label for p in first} == {PARAPHRASE, NEAR_MISS}
    assert all(p.first != p.second for p in first if p.label == NEAR_MISS)


def test_a_slot_swap_changes_exactly_one_slot() -> None:
    pairs = slot_pairs(TEMPLATES, 50)
    assert len(pairs) == 100
    assert [p.label for p in pairs[:2]] == [PARAPHRASE, NEAR_MISS]
    assert pairs == slot_pairs(TEMPLATES, 50)
    pattern = ("Is {} faster than {}?", ("a|b", "c|d"))
    slots = re.compile(r"is (\w) faster than (\w)", re.IGNORECASE)
    for pair in slot_pairs([pattern], 20, seed=3)[1::2]:
        first, second = slots.search(pair.first), slots.search(pair.second)
        assert first is not None
        assert second is not None
        assert sum(a != b for a, b in zip(first.groups(), second.groups(), strict=True)) == 1


def test_the_held_out_split_is_never_trained_on(tmp_path: Path) -> None:
    rows = [
        {"a": "tune a", "b": "tune b", "label": "paraphrase", "split": "tune", "domain": "x"},
        {"a": "held a", "b": "held b", "label": "near_miss", "split": "held_out", "domain": "x"},
        {"a": "plain a", "b": "plain b", "label": "near_miss"},
    ]
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert [pair.first for pair, _ in labelled_pairs(path)] == ["tune a", "plain a"]
    texts = {text for pair in training_pairs([path]) for text in (pair.first, pair.second)}
    assert not any("held" in text for text in texts)


def test_the_recipe_changes_with_the_pairs_only(tmp_path: Path) -> None:
    path = tmp_path / "pairs.jsonl"
    row = {"a": "How do I sort a list?", "b": "how to sort a list", "label": "paraphrase"}
    path.write_text(json.dumps(row) + "\n")
    first = recipe([path])
    path.write_text(json.dumps(row) + "\n\n")  # the same pairs
    assert recipe([path]) == first
    path.write_text(json.dumps({**row, "b": "how to sort a dict"}) + "\n")
    assert recipe([path]) != first
