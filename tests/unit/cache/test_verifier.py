"""cache/verifier.py's async front (a fake model) and cache/verifier_model.py's judgement of
what is in a folder; the real model: tests/integration/cache/test_verifier.py."""

from __future__ import annotations

import asyncio
import json
import math
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from cache.encoders import EmbedderError
from cache.verifier import (
    AGREES,
    MODEL_FILE,
    Models,
    Verifier,
    agreement,
    refused_fast,
    verdicts,
)
from cache.verifier_fast import (
    FAST_FILE,
    FAST_MANIFEST,
    RECIPE,
    Stray,
    current,
    exact_digest,
    fast_margin,
    read_margin,
)
from cache.verifier_model import complete, make
from cache.verifier_training import MANIFEST_FILE, recipe


class LengthModel:
    """Scores a pair by whether both questions have the same length."""

    def scores(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        return np.array([float(len(a) == len(b)) for a, b in pairs], dtype=np.float32)


async def wait_until(condition: object) -> None:
    for _ in range(10_000):
        if condition():  # type: ignore[operator]
            return
        await asyncio.sleep(0.001)
    raise AssertionError("never happened")


async def test_the_model_loads_once_in_the_background_and_then_scores() -> None:
    release = threading.Event()
    loads = []

    def factory() -> Models:
        loads.append(1)
        release.wait(10)
        return Models(LengthModel())

    verifier = Verifier(factory)
    assert not verifier.ready
    verifier.warm()
    verifier.warm()
    assert not verifier.ready  # still loading: warm() returned at once
    release.set()
    await wait_until(lambda: verifier.ready)
    scores = await verifier.scores("abc", ["xyz", "wxyz"])
    assert scores.tolist() == [1.0, 0.0]
    assert loads == [1]
    assert (verifier.calls, verifier.pairs) == (1, 2)


async def test_a_model_that_fails_to_load_fails_every_verdict() -> None:
    def factory() -> Models:
        raise OSError("no such model")

    verifier = Verifier(factory)
    verifier.warm()
    await wait_until(lambda: verifier.failed is not None)
    assert not verifier.ready
    with pytest.raises(OSError, match="no such model"):
        await verifier.scores("a", ["b"])


class FirstLonger:
    """An asymmetric model: sure when the first question is the longer one."""

    def scores(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        return np.array([0.9 if len(a) > len(b) else 0.2 for a, b in pairs], dtype=np.float32)


def test_agreement_is_the_lower_of_both_readings() -> None:
    pairs = [("a longer one", "short"), ("short", "a longer one")]
    assert agreement(FirstLonger(), pairs).tolist() == pytest.approx([0.2, 0.2])
    assert agreement(LengthModel(), [("abc", "xyz")]).tolist() == [1.0]
    assert agreement(LengthModel(), []).shape == (0,)


async def test_the_front_scores_by_agreement() -> None:
    verifier = Verifier(lambda: Models(FirstLonger()))
    assert (await verifier.scores("short", ["a longer one"])).tolist() == pytest.approx([0.2])
    assert verifier.fast is False


class Recorded:
    """Scores pairs from a table, and records every pair it read."""

    def __init__(self, table: dict[tuple[str, str], float]) -> None:
        self.table = table
        self.read: list[tuple[str, str]] = []

    def scores(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        self.read += pairs
        return np.array([self.table[pair] for pair in pairs], dtype=np.float32)


def test_each_step_reads_only_what_the_steps_before_could_not_refuse() -> None:
    far, near, one_way, served, other_way = (("s", q) for q in "abcde")
    fast = Recorded({far: 0.001, near: 0.2, one_way: 0.9, served: 0.9, other_way: 0.6})
    exact = Recorded(
        {near: 0.9, ("b", "s"): 0.95, one_way: 0.3, served: 0.8, ("d", "s"): 0.7}
        | {other_way: 0.6, ("e", "s"): 0.1}
    )
    pairs = [far, near, one_way, served, other_way]
    found = verdicts(Models(exact, fast, margin=4.0), pairs)
    assert [v.step for v in found] == ["fast", "both_ways", "one_way", "both_ways", "both_ways"]
    assert [v.score for v in found] == pytest.approx([0.001, 0.9, 0.3, 0.7, 0.1])
    assert fast.read == pairs  # int8 reads every pair once, one way
    # fp32 never reads what int8 refused, and the other way only after one way agreed
    assert exact.read == [near, one_way, served, other_way, ("b", "s"), ("d", "s"), ("e", "s")]


def test_a_fast_reading_near_the_boundary_refuses_nothing() -> None:
    """0.2 is 1.4 logits below the boundary: within a margin of 4, fp32 decides (and serves)."""
    assert refused_fast(0.001, 4.0)
    assert not refused_fast(0.2, 4.0)
    assert not refused_fast(0.0, math.inf)  # no measured margin: int8 refuses nothing


def test_the_decisions_are_those_of_both_readings_whatever_the_steps() -> None:
    """Without a fast copy the cascade decides as `agreement` does, pair for pair."""
    pairs = [("a longer one", "short"), ("short", "a longer one"), ("abc", "xyz"), ("ab", "abc")]
    for model in (FirstLonger(), LengthModel()):
        expected = agreement(model, pairs) >= AGREES
        found = [v.score >= AGREES for v in verdicts(Models(model), pairs)]
        assert found == expected.tolist()


def test_the_margin_doubles_the_largest_stray_seen_and_adds_at_least_a_logit() -> None:
    assert fast_margin(Stray(max=2.13, p99=1.06, pairs=1310)) == 4.26
    assert fast_margin(Stray(max=0.3, p99=0.1, pairs=10)) == 1.3
    with pytest.raises(ValueError, match="not a measured stray"):
        Stray(max=float("nan"), p99=0.0, pairs=3)


def write_model(folder: Path, manifest: object) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MODEL_FILE).write_bytes(b"onnx")
    (folder / "tokenizer.json").write_text("{}")
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest))


def test_a_model_is_current_only_if_made_from_these_pairs(tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"a": "a?", "b": "b?", "label": "near_miss"}) + "\n")
    folder = tmp_path / "verifier"
    assert not complete(folder, [pairs])
    write_model(folder, recipe([pairs]))
    assert complete(folder, [pairs])
    pairs.write_text(json.dumps({"a": "a?", "b": "c?", "label": "near_miss"}) + "\n")
    assert not complete(folder, [pairs])  # the pairs changed: made anew
    (folder / MODEL_FILE).unlink()
    write_model(folder, recipe([pairs]))
    assert complete(folder, [pairs])
    (folder / MODEL_FILE).unlink()
    assert not complete(folder, [pairs])  # a manifest without its model


def test_without_the_pairs_to_compare_a_whole_model_is_used(tmp_path: Path) -> None:
    """An install without the repository's labelled files: a verifier copied in is used."""
    folder = tmp_path / "verifier"
    write_model(folder, {"format": 1})
    assert complete(folder, [tmp_path / "absent.jsonl"])


def test_making_it_without_the_labelled_pairs_says_what_is_missing(tmp_path: Path) -> None:
    absent = tmp_path / "pairs.jsonl"
    with pytest.raises(EmbedderError, match=r"making it \(once\) needs .*pairs\.jsonl"):
        make(tmp_path / "verifier", [absent])
    assert not (tmp_path / "verifier").exists()


def test_a_fast_copy_counts_only_whole_and_made_from_the_verifier_beside_it(
    tmp_path: Path,
) -> None:
    (tmp_path / MODEL_FILE).write_bytes(b"an fp32 verifier")
    assert read_margin(tmp_path) is None
    assert not current(tmp_path, MODEL_FILE)
    made_from = exact_digest(tmp_path, MODEL_FILE)
    stray = {"max": 2.13, "p99": 1.06, "pairs": 1310}
    manifest = {"recipe": RECIPE, "from": made_from, "stray": stray}
    (tmp_path / FAST_MANIFEST).write_text(json.dumps(manifest))
    assert read_margin(tmp_path) is None  # a manifest without its model
    (tmp_path / FAST_FILE).write_bytes(b"its int8 copy")
    assert read_margin(tmp_path) == 4.26
    assert current(tmp_path, MODEL_FILE)
    (tmp_path / MODEL_FILE).write_bytes(b"another fp32 verifier")
    assert not current(tmp_path, MODEL_FILE)  # a new verifier: a new copy is made
    (tmp_path / FAST_MANIFEST).write_text(json.dumps({**manifest, "recipe": {"format": 0}}))
    assert not current(tmp_path, MODEL_FILE)
