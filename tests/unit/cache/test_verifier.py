"""cache/verifier.py's async front (a fake model) and cache/verifier_model.py's judgement of
what is in a folder; the real model: tests/integration/cache/test_verifier.py."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from cache.encoders import EmbedderError
from cache.verifier import AGREES, MODEL_FILE, Verifier, agreement, lower_priority, verdicts
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

    def factory() -> LengthModel:
        loads.append(1)
        release.wait(10)
        return LengthModel()

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
    def factory() -> LengthModel:
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
    verifier = Verifier(FirstLonger)
    assert (await verifier.scores("short", ["a longer one"])).tolist() == pytest.approx([0.2])


class Recorded:
    """Scores pairs from a table, and records every pair it read."""

    def __init__(self, table: dict[tuple[str, str], float]) -> None:
        self.table = table
        self.read: list[tuple[str, str]] = []

    def scores(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        self.read += pairs
        return np.array([self.table[pair] for pair in pairs], dtype=np.float32)


def test_the_other_way_is_read_only_for_pairs_the_first_agreed_on() -> None:
    refused, served, second_refuses = (("s", q) for q in "abc")
    model = Recorded(
        {refused: 0.3, served: 0.8, ("b", "s"): 0.7, second_refuses: 0.9, ("c", "s"): 0.1}
    )
    found = verdicts(model, [refused, served, second_refuses])
    assert [v.step for v in found] == ["one_way", "both_ways", "both_ways"]
    assert [v.score for v in found] == pytest.approx([0.3, 0.7, 0.1])
    assert model.read == [refused, served, second_refuses, ("b", "s"), ("c", "s")]
    assert verdicts(model, []) == []


def test_the_decisions_are_those_of_both_readings() -> None:
    pairs = [("a longer one", "short"), ("short", "a longer one"), ("abc", "xyz"), ("ab", "abc")]
    for model in (FirstLonger(), LengthModel()):
        expected = agreement(model, pairs) >= AGREES
        assert [v.score >= AGREES for v in verdicts(model, pairs)] == expected.tolist()


async def test_the_front_counts_verdicts_by_step() -> None:
    verifier = Verifier(FirstLonger)
    await verifier.scores("short", ["a longer one", "tiny"])
    assert verifier.steps == {"both_ways": 1, "one_way": 1}


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


class HeldModel(LengthModel):
    """LengthModel whose first reading waits for the test: the reader thread stays busy."""

    def __init__(self) -> None:
        self.read: list[list[tuple[str, str]]] = []
        self.reading = threading.Event()
        self.release = threading.Event()

    def scores(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        self.read.append(list(pairs))
        self.reading.set()
        self.release.wait(10)
        return super().scores(pairs)


async def test_a_reading_queued_behind_another_is_dropped_unread_when_cancelled() -> None:
    model = HeldModel()
    verifier = Verifier(lambda: model)
    verifier.warm()
    await wait_until(lambda: verifier.ready)
    first = asyncio.create_task(verifier.scores("abc", ["xyz"]))
    await asyncio.to_thread(model.reading.wait, 10)  # the one reader thread is busy with it
    queued = asyncio.create_task(verifier.scores("abcd", ["wxyz"]))
    await wait_until(lambda: verifier.calls == 2)  # submitted behind the first
    queued.cancel()  # the engine answered first
    with pytest.raises(asyncio.CancelledError):
        await queued  # its reading withdrawn from the reader's queue meanwhile
    model.release.set()
    assert (await first).tolist() == [1.0]
    await verifier.scores("ab", ["cdef"])  # one reader, first come first served: after the second
    assert ("wxyz", "abcd") not in [pair for pairs in model.read for pair in pairs]
    assert model.read[-1] == [("cdef", "ab")]


def test_the_reader_thread_runs_below_the_rest_of_the_process() -> None:
    found: list[int] = []

    def lowered_here() -> None:
        before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        lower_priority(3)
        found.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) - before)

    thread = threading.Thread(target=lowered_here)
    thread.start()
    thread.join()
    assert found == [3]
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == os.getpriority(
        os.PRIO_PROCESS, 0
    )  # the caller's own priority untouched


class _Agreeing:
    """An ONNX session that agrees with every pair it is fed (the model's part is not at stake)."""

    def run(self, outputs: list[str], feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        return [np.full((len(feed["input_ids"]), 1), 0.99, dtype=np.float32)]


def test_a_pair_longer_than_the_model_reads_is_never_agreed_on() -> None:
    """The pair is read in 256 tokens: two questions of 401 Chinese characters that differ only
    in the last ("是" against "否", yes against no) were the same input after the cut."""
    from cache.encoders import TOKENIZER_FILE, load_tokenizer, source_model
    from cache.verifier import OnnxVerifier

    tokenizer = load_tokenizer(next(source_model().rglob(TOKENIZER_FILE)))
    verifier = OnnxVerifier(_Agreeing(), tokenizer)
    long_pair = ("中" * 400 + "是", "中" * 400 + "否")
    scores = verifier.scores(
        [("How do I reset my password?", "How can I reset my password?"), long_pair]
    )
    assert scores.tolist() == pytest.approx([0.99, 0.0])
