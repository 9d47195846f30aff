"""cache/judge.py: what the guard's two readings refuse before any model runs."""

from __future__ import annotations

import asyncio

from cache.judge import Candidate, Judge
from cache.spelling import MENDED_AT_MOST, lexicon_of
from cache.stats import CacheStats

LEXICON = lexicon_of(["the", "how", "do", "i", "make", "without", "an", "oven", "what", "can"])


def _screened(stored: str, asked: str) -> object:
    judge = Judge(CacheStats(), lexicon=LEXICON)
    nearest = [Candidate(1, stored, 0.97)]
    return asyncio.run(judge.screened(nearest, asked, 0.9, lambda ident: True))


def test_a_pair_the_correction_can_read_whole_is_judged_on_it() -> None:
    """The typo "witout" is "without": the corrected reading sees the negation the typo hid."""
    assert _screened("what can i make without an oven", "what can i make witout an oven") != ""
    served = _screened("how do i make an oven", "how do i make an oven")
    assert isinstance(served, Candidate)


def test_a_pair_with_more_unknown_words_than_the_correction_reads_is_refused() -> None:
    """Decoy typos past the budget must not leave a hidden difference unread: refused."""
    count = MENDED_AT_MOST + 1
    stored = " ".join(f"zqx{letter}" for letter in "abcdefgh"[:count])
    asked = " ".join(f"wvy{letter}" for letter in "abcdefgh"[:count])
    refused = _screened(f"how do i make an oven {stored}", f"how do i make an oven {asked}")
    assert refused == "too many unknown words to compare"
