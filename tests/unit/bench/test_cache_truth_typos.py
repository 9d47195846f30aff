"""bench/cache_truth.py's typed variant: the same pairs, each `b` as typed in a hurry, in
conversations of their own."""

from __future__ import annotations

import random

from bench.cache_truth import mistyped, with_typos

ROW = {
    "id": "law-007",
    "a": "Can a landlord enter without notice?",
    "b": "Can a landlord enter with notice?",
    "label": "near_miss",
    "kind": "negation",
}


def test_a_mistyped_question_is_lower_case_with_two_long_words_touched() -> None:
    typed = mistyped("Can a landlord enter with notice?", random.Random(1))
    words, original = typed.split(), "can a landlord enter with notice".split()
    assert typed == typed.lower()
    assert not typed.endswith("?")
    assert len(words) == len(original)
    changed = [(w, o) for w, o in zip(words, original, strict=True) if w != o]
    assert len(changed) == 2
    for word, was in changed:
        assert len(was) >= 5
        assert (word[0], word[-1]) == (was[0], was[-1])
        assert len(word) == len(was) - 1 or sorted(word) == sorted(was)


def test_short_questions_keep_their_short_words() -> None:
    assert mistyped("Is it on?", random.Random(1)) == "is it on"


def test_the_typed_set_keeps_labels_and_kinds_in_conversations_of_its_own() -> None:
    (typed,) = with_typos([ROW])
    assert typed["id"] == "law-007-typos"
    assert (typed["a"], typed["label"], typed["kind"]) == (ROW["a"], "near_miss", "negation")
    assert typed["b"] != ROW["b"]
    assert with_typos([ROW]) == [typed]  # seeded: the same every run
