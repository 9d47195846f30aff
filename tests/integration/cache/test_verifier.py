"""The real answer verifier, as `overspill verifier` made it in $OVERSPILL_HOME (scripts/test
does, before the suite): what it reads in a pair of questions, and that one padded batch gives
each pair what it gets alone.

The pairs here are written for this test, in none of the files it learnt from, and clear-cut:
a verifier trained on another CPU is a slightly different model, and must agree on these. The
labelled figures (recall, wrong hits on held-out pairs) are bench/cache_truth.py's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cache.verifier import AGREES, OnnxVerifier, agreement, load_verifier, verdicts
from cache.verifier_model import complete, verifier_folder
from proxy.home import overspill_home

SAME = [
    ("How can I cancel my gym membership?", "how do i cancel my gym membreship"),
    (
        "What's the boiling point of water at sea level?",
        "At sea level, what temperature does water boil at?",
    ),
    ("Hi! Could you explain what a Roth IRA is? Thanks", "What is a Roth IRA?"),
]
DIFFERENT = [
    ("What is a good book on machine learning?", "What is a good course on machine learning?"),
    ("How do I install Docker on Windows?", "How do I uninstall Docker on Windows?"),
    ("Is it safe to eat raw eggs while pregnant?", "Is it safe to eat raw fish while pregnant?"),
]


@pytest.fixture(scope="module")
def verifier() -> OnnxVerifier:
    folder = verifier_folder(overspill_home())
    assert complete(folder), f"no current verifier in {folder}: run `overspill verifier`"
    return load_verifier(folder)


def test_paraphrases_are_agreed_and_one_swapped_word_is_not(verifier: OnnxVerifier) -> None:
    assert (agreement(verifier, SAME) >= AGREES).all(), agreement(verifier, SAME)
    assert (agreement(verifier, DIFFERENT) < AGREES).all(), agreement(verifier, DIFFERENT)


def test_a_pair_costs_a_second_reading_only_when_the_first_agrees(verifier: OnnxVerifier) -> None:
    """Decided as both readings decide; the plainest near-misses in one run."""
    plain = [
        ("How many calories are in a banana?", "How many calories are in an apple?"),
        ("What is the population of France?", "What is the population of Germany?"),
    ]
    pairs = SAME + DIFFERENT + plain
    found = verdicts(verifier, pairs)
    assert [v.score >= AGREES for v in found] == (agreement(verifier, pairs) >= AGREES).tolist()
    assert [v.step for v in found[: len(SAME)]] == ["both_ways"] * len(SAME)
    assert [v.step for v in found[-len(plain) :]] == ["one_way"] * len(plain)


def test_a_batch_scores_each_pair_as_it_would_be_alone(verifier: OnnxVerifier) -> None:
    pairs = SAME + DIFFERENT
    alone = np.array([verifier.scores([pair])[0] for pair in pairs])
    np.testing.assert_allclose(verifier.scores(pairs), alone, atol=1e-5)
    assert verifier.scores([]).shape == (0,)


def test_the_command_says_whether_a_current_verifier_is_there(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "proxy.cli", "verifier", "--check"]
    here = subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)
    assert here.returncode == 0, here.stdout + here.stderr
    assert here.stdout.strip().endswith(": current")
    empty = {**os.environ, "OVERSPILL_HOME": str(tmp_path)}
    elsewhere = subprocess.run(
        command, capture_output=True, text=True, check=False, timeout=60, env=empty
    )
    assert elsewhere.returncode == 1
    assert "missing or out of date" in elsewhere.stdout
