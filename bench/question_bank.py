"""Questions nobody asked before, for bench/cache_miss.py: ten templates across support,
coding, cooking, medicine, law, travel, science, devices, HR and product questions, whose slots
multiply into tens of thousands of distinct questions, each asked in several settings."""

from __future__ import annotations

import itertools
import random

from cache.question_templates import TEMPLATES

# The setting a question is asked in: a qualifier that may change the answer.
SETTINGS = (
    "",
    " for my small business",
    " as a complete beginner",
    " on a tight budget",
    " this year",
    " step by step",
    " for a school project",
    " in the simplest terms",
    " for someone in a hurry",
    " with the most important caveats",
    " for a presentation at work",
    " and what are the risks",
)
OPENINGS = ("", "Quick question: ", "Hi, ", "I was wondering: ", "Please help. ")


def combinations(seed: int = 18) -> list[str]:
    """Every template filled with every combination of its slots, shuffled (deterministic)."""
    bank = [
        pattern.format(*slots)
        for pattern, choices in TEMPLATES
        for slots in itertools.product(*(choice.split("|") for choice in choices))
    ]
    random.Random(seed).shuffle(bank)
    return bank


def asked_in_settings(base: str, rng: random.Random) -> list[str]:
    """`base` in every setting, each with an opening of its own."""
    stem = base.rstrip("?.")
    end = base[len(stem) :]
    return [rng.choice(OPENINGS) + stem + setting + end for setting in SETTINGS]


def split(stored: int, asked: int, seed: int = 18) -> tuple[list[str], list[str]]:
    """`stored` questions for the cache and `asked` others to send, from disjoint combinations:
    an asked question's nearest stored ones differ from it in a slot, not only in wording."""
    rng = random.Random(seed)
    bank = combinations(seed)
    asked_list = [rng.choice(OPENINGS) + base for base in bank[:asked]]
    stored_list = [q for base in bank[asked:] for q in asked_in_settings(base, rng)][:stored]
    if len(asked_list) < asked or len(stored_list) < stored:
        raise SystemExit(f"{len(bank):,} combinations: too few for {stored:,} + {asked:,}")
    return stored_list, asked_list
