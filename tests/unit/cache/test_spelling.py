"""cache/spelling.py: typos mended toward the stored questions' words, else the encoder's
commonest; known, short and foreign words left as they are; a context's vocabulary follows its
entries."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from cache.encoders import source_model
from cache.spelling import (
    LONGEST,
    MENDED_AT_MOST,
    ContextWords,
    corrected,
    lexicon_of,
    mended,
    one_edit,
    read_lexicon,
    spelled,
)

LEXICON = lexicon_of(
    ["[PAD]", "[unused0]", "!", "the", "how", "plan", "pain", "##ing", "can", "stress", "chest"]
)


def test_the_lexicon_keeps_plain_words_ranked_as_listed() -> None:
    assert list(LEXICON.ranks) == ["the", "how", "plan", "pain", "can", "stress", "chest"]


def test_one_edit_reaches_each_kind_of_typo() -> None:
    edits = one_edit("pain")
    assert {"pin", "pian", "rain", "paint"} <= edits  # dropped, swapped, changed, added
    assert "pain" not in edits
    assert "pn" not in edits  # two edits away


def test_an_unknown_word_becomes_a_stored_word_one_edit_away() -> None:
    assert mended("pian", LEXICON, {"pain": 1}) == "pain"


def test_an_unknown_word_no_stored_word_is_near_stays_as_typed() -> None:
    """Not bent into the vocabulary's words: that one lacks "relieves", "blender", "delete"."""
    assert mended("pian", LEXICON, {}) == "pian"
    assert mended("pian", LEXICON, {"chest": 4}) == "pian"


def test_a_known_word_is_never_mended_into_a_stored_one() -> None:
    assert mended("plan", LEXICON, {"pain": 1}) == "plan"  # a near-miss, not a typo


def test_the_most_used_stored_word_wins_then_the_first_alphabetically() -> None:
    assert mended("cart", LEXICON, {"card": 1, "care": 3}) == "care"
    assert mended("cart", LEXICON, {"card": 2, "care": 2}) == "card"


def test_known_short_and_hopeless_words_stay_as_they_are() -> None:
    assert mended("Pain", LEXICON, {}) == "Pain"  # known, whatever its case
    assert mended("hom", LEXICON, {"home": 1}) == "hom"  # too short to tell
    assert mended("metformin", LEXICON, {}) == "metformin"  # nothing one edit away
    assert mended("sourdough", LEXICON, {"sourdough": 2}) == "sourdough"  # a stored word


def test_a_question_is_mended_word_by_word_and_keeps_everything_else() -> None:
    asked = "Can strss cause chest pian? (since 2024-03-01, gpt-4o)"
    assert spelled(asked, LEXICON, {"pain": 1, "stress": 1}) == (
        "Can stress cause chest pain? (since 2024-03-01, gpt-4o)"
    )


def test_a_question_in_another_script_or_with_accents_is_left_alone() -> None:
    asked = "¿Cómo restablezco mi contraseña?"
    assert spelled(asked, LEXICON, {"contrastna": 1}) == asked


@given(st.lists(st.sampled_from([*LEXICON.ranks, "pian", "strss", "xyzzy", "?", "2"]), max_size=8))
def test_mending_twice_changes_nothing_more(words: list[str]) -> None:
    """Within the budget: past it, a second pass mends words the first had no budget left for."""
    assume(sum(word in ("pian", "strss", "xyzzy") for word in words) <= MENDED_AT_MOST)
    once = spelled(" ".join(words), LEXICON, {"pain": 1})
    assert spelled(once, LEXICON, {"pain": 1}) == once


@given(st.lists(st.sampled_from(sorted(LEXICON.ranks)), max_size=8))
def test_a_question_of_known_words_is_embedded_as_asked(words: list[str]) -> None:
    asked = " ".join(words)
    assert spelled(asked, LEXICON, {"pain": 1, "plans": 2, "stresses": 1}) == asked


def test_a_context_counts_its_questions_words_as_mended() -> None:
    words = ContextWords(LEXICON)
    words.add(1, "ctx", "Can stress cause chest pain?")
    words.add(2, "ctx", "Chest pain after a run")
    words.add(3, "ctx", "can strss cause chest pian")  # a typo stored: counted as mended
    assert dict(words.known("ctx")) == {"stress": 2, "cause": 2, "chest": 3, "pain": 3, "after": 1}
    assert words.known("other") == {}
    assert words.spelled("ctx", "pian") == "pain"
    assert words.spelled("other", "pian") == "pian"


def test_dropping_an_entry_forgets_its_words_and_an_empty_context() -> None:
    words = ContextWords(LEXICON)
    words.add(1, "ctx", "Can stress cause chest pain?")
    words.add(1, "ctx", "Can stress cause chest pain?")  # the same entry again: counted once
    words.add(2, "ctx", "chest pain")
    words.drop(1)
    assert dict(words.known("ctx")) == {"chest": 1, "pain": 1}
    words.drop(2)
    words.drop(2)  # already gone: nothing happens
    assert words.known("ctx") == {}
    assert words.spelled("ctx", "pian") == "pian"


STORED = (
    "How do I change my profile picture?",
    "What is intellectual property?",
    "How do I reverse a list in Python?",
)


@pytest.mark.parametrize(
    ("asked", "mended_as"),
    [
        ("how do i chnage my profle picture", "how do i change my profile picture"),
        ("what is intelectual proprety", "what is intellectual property"),
        ("What helps with a sore throat?", "What helps with a sore throat?"),
        ("how do i reverse a lsit in pyhton", "how do i reverse a list in python"),
    ],
)
def test_the_encoders_vocabulary_tells_the_typos(asked: str, mended_as: str) -> None:
    lexicon = read_lexicon(source_model() / "vocab.txt")
    assert len(lexicon.ranks) > 20_000
    words = ContextWords(lexicon)
    for ident, question in enumerate(STORED):
        words.add(ident, "ctx", question)
    assert words.spelled("ctx", asked) == mended_as


def test_the_guards_reading_corrects_toward_the_other_question_first() -> None:
    assert corrected("chest pian", "is chest pain bad", LEXICON) == "chest pain"


def test_the_guards_reading_then_takes_the_vocabularys_commonest_word() -> None:
    assert corrected("chest pian", "is it bad", LEXICON) == "chest plan"
    assert corrected("chest xyzzy and hom", "is it bad", LEXICON) == "chest xyzzy and hom"


def test_the_guards_reading_leaves_known_words_and_other_scripts() -> None:
    assert corrected("the plan", "the pain", LEXICON) == "the plan"
    assert corrected("¿pian?", "pain", LEXICON) == "¿pian?"


@pytest.mark.parametrize(
    ("typed", "read"),
    [
        ("what dishes can i make witout an oven", "what dishes can i make without an oven"),
        (
            "what happens to my acount befroe the trial ends",
            "what happens to my account before the trial ends",
        ),
        ("a shopping list for dinners, in greman", "a shopping list for dinners, in german"),
    ],
)
def test_a_typo_does_not_hide_a_critical_word_from_the_guard(typed: str, read: str) -> None:
    lexicon = read_lexicon(source_model() / "vocab.txt")
    assert corrected(typed, "What happens to my account after the trial?", lexicon) == read


def _counting_edits(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The words whose neighbours one edit away were listed: the mender's whole cost."""
    import cache.spelling as spelling

    listed: list[str] = []
    real = spelling.one_edit

    def counted(word: str) -> set[str]:
        listed.append(word)
        return real(word)

    monkeypatch.setattr(spelling, "one_edit", counted)
    return listed


def test_a_huge_word_is_never_mended_so_its_cost_stays_linear(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One 6,000-letter word took 7.4 s and 1.8 GB to list its neighbours (their number and
    length both grow with it); past `LONGEST` letters a word is left as typed, unread."""
    listed = _counting_edits(monkeypatch)
    huge = "a" * 6_000
    assert spelled(huge, LEXICON, {"pain": 1}) == huge
    assert corrected(huge, "chest pain", LEXICON) is None  # unread: the guard refuses the pair
    assert listed == []


def test_at_most_a_budget_of_unknown_words_is_looked_up_per_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    listed = _counting_edits(monkeypatch)
    words = [f"pian{'x' * (i % (LONGEST - 4))}" for i in range(1_000)]
    text = " ".join(words)
    mended_text = spelled(text, LEXICON, {"pain": 1})
    assert len(listed) == MENDED_AT_MOST
    assert mended_text.split()[0] == "pain"  # the first unknown words are still mended
    assert mended_text.split()[MENDED_AT_MOST:] == words[MENDED_AT_MOST:]
    listed.clear()
    assert corrected(text, "chest pain", LEXICON) is None
    assert len(listed) == MENDED_AT_MOST


def test_a_few_typos_are_still_corrected_within_the_budget() -> None:
    assert corrected("chset pian", "chest pain", LEXICON) == "chest pain"
