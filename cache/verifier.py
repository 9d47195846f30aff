"""The answer verifier: does the answer to a stored question answer the one asked? A cosine of
two sentence embeddings cannot see one plain word swapped for another ("a quick lasagne recipe"
vs "a one-pot lasagne recipe" score 0.93), nor can the guard's word tables see a word they do
not list. A cross-encoder reads both questions at once, token against token, so it can.

The model is made once (cache/verifier_training.py, in a child process: torch never enters a
server) and served here on ONNX Runtime, fp32, one thread. The cache consults it only for the
candidates that passed the similarity threshold and the guard: a clear miss, most lookups, never
pays for it. A candidate it reads costs one run when the first reading refuses it, two only
when that one agrees (`verdicts`). Readings wait for the one reader per cache scope, the
scopes taking turns (cache/turns.py): one caller's flood of borderline questions delays another's
reading by at most one reading per other busy scope, and a scope holds at most QUEUED_PER_SCOPE
waiting.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import os
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt

from cache.encoders import TOKENIZER_FILE, EmbedderError, load_tokenizer, padded
from cache.turns import Turns

log = logging.getLogger("overspill")

VERIFIER_DIR = "all-minilm-l6-v2-verifier"  # under $OVERSPILL_HOME/models
MODEL_FILE = "verifier.onnx"
# The agreement (the lower of the two readings' probabilities, `agreement`) at or above which
# the stored answer is served: the classifier's own boundary.
AGREES = 0.5

Scores = npt.NDArray[np.float32]


class ScoresPairs(Protocol):
    def scores(self, pairs: Sequence[tuple[str, str]]) -> Scores:
        """The probability that one answer serves both questions, for each pair."""
        ...


class Verifies(Protocol):
    """What the cache asks of a verifier (Verifier; tests give their own)."""

    @property
    def ready(self) -> bool:
        """The model is loaded: a lookup would not wait for it."""
        ...

    def warm(self) -> None:
        """Start loading the model, if not yet done."""
        ...

    async def scores(self, question: str, stored: Sequence[str], scope: str = "") -> Scores:
        """Read in `scope`'s turn (the cache scope asking); Crowded when it has too many
        readings waiting already."""
        ...


class OnnxVerifier:
    """The exported cross-encoder: "[CLS] a [SEP] b [SEP]" in one padded batch (padding is
    masked out: a pair's score does not depend on its batch-mates). A pair longer than the
    model reads (256 tokens together) scores 0: two questions that differ only past the cut
    would read the same (512 characters of Chinese, or of punctuation, are 512 tokens)."""

    def __init__(self, session: Any, tokenizer: Any) -> None:
        self._session = session
        self._tokenizer = tokenizer

    def scores(self, pairs: Sequence[tuple[str, str]]) -> Scores:
        if not pairs:
            return np.empty(0, dtype=np.float32)
        encodings = self._tokenizer.encode_batch(list(pairs))
        (probabilities,) = self._session.run(["paraphrase"], padded(encodings))
        result: Scores = np.asarray(probabilities, dtype=np.float32).reshape(len(pairs))
        cut = np.array([bool(encoding.overflowing) for encoding in encodings])
        result[cut] = 0.0
        return result


def agreement(model: ScoresPairs, pairs: Sequence[tuple[str, str]]) -> Scores:
    """How surely one answer serves both questions of each pair: the lower of the two readings,
    stored question first and asked question first, in one batch. The relation is symmetric and
    the model is not: one order alone served "a one-pot shakshuka recipe" for "a spicy" one (p
    0.84; 0.06 the other way). Both readings served no near-miss of the 328 labelled ones where
    one reading served 2 at the same boundary (README, "The answer verifier")."""
    if not pairs:
        return np.empty(0, dtype=np.float32)
    both = model.scores([*pairs, *((b, a) for a, b in pairs)])
    lower: Scores = np.minimum(both[: len(pairs)], both[len(pairs) :])
    return lower


Step = Literal["one_way", "both_ways"]
STEPS: tuple[Step, ...] = ("one_way", "both_ways")


@dataclass(frozen=True)
class Verdict:
    """`score`: the agreement, or for a pair the first reading refused (`step` "one_way") that
    reading, below AGREES either way."""

    score: float
    step: Step


def verdicts(model: ScoresPairs, pairs: Sequence[tuple[str, str]]) -> list[Verdict]:
    """`agreement`'s decision for each (stored, asked) pair, reading the other way only the
    pairs the first way agreed on: a first reading below AGREES is a refusal whatever the other
    says (the agreement is the lower of the two). Most candidates are other questions, so most
    cost one run, not two: on the question bank's one-slot neighbours this cut the verifier's
    CPU per candidate from 22 to 13-18 ms here (README, "What a miss costs")."""
    first = _scores(model, pairs)
    agreed = [row for row, score in enumerate(first) if score >= AGREES]
    other = dict(zip(agreed, _scores(model, [pairs[row][::-1] for row in agreed]), strict=True))
    return [
        Verdict(min(score, other[row]), "both_ways") if row in other else Verdict(score, "one_way")
        for row, score in enumerate(first)
    ]


def _scores(model: ScoresPairs, pairs: Sequence[tuple[str, str]]) -> list[float]:
    return [float(score) for score in model.scores(pairs)] if pairs else []


def load_verifier(folder: Path) -> OnnxVerifier:
    """Blocks for a second or so: call it off the event loop."""
    import onnxruntime  # type: ignore[import-untyped]

    model = folder / MODEL_FILE
    if not model.is_file():
        raise EmbedderError(
            f"the answer verifier is not in {folder}: make it once with `overspill verifier` "
            "(scripts/setup does)"
        )
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    session = onnxruntime.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    return OnnxVerifier(session, load_tokenizer(folder / TOKENIZER_FILE))


# How much lower than the rest of the proxy the verifier's reader thread runs (Linux nice):
# under load the event loop and the embedder, which every request waits for, go first.
READER_NICENESS = 10


def lower_priority(niceness: int) -> None:
    """The calling thread's scheduling priority lowered by `niceness` (on Linux a thread has
    its own); where a thread cannot have one, nothing changes."""
    with contextlib.suppress(OSError, AttributeError):
        thread = threading.get_native_id()
        current = os.getpriority(os.PRIO_PROCESS, thread)
        os.setpriority(os.PRIO_PROCESS, thread, min(19, current + niceness))


# Readings one scope may have waiting for the reader: past them its lookups are misses, unread
# (an engine call, never a wrong answer). 16 are 0.2-0.4 s of the reader's work here, longer
# than a local engine takes to begin the answer a speculated reading races.
QUEUED_PER_SCOPE = 16


class Crowded(Exception):
    """The scope has QUEUED_PER_SCOPE readings waiting: this one is not read."""


@dataclass(eq=False)
class _Waiting:
    pairs: list[tuple[str, str]]
    verdicts: asyncio.Future[list[Verdict]]


class Verifier:
    """The async front: the model loads (made first, if it must be: minutes) in a daemon thread
    of its own, so neither a lookup nor a proxy's exit waits for it; verdicts run one at a time
    in a reader thread of their own, at a lower priority, so a lookup waits for them without
    holding the event loop, and under load they take the CPU the requests leave. They wait in
    turns by scope (cache/turns.py), handed to the reader one at a time; a reading still waiting
    when its lookup is cancelled (the engine answered first) is never run."""

    def __init__(self, factory: Callable[[], ScoresPairs], niceness: int = READER_NICENESS) -> None:
        self._factory = factory
        self._model: concurrent.futures.Future[ScoresPairs] = concurrent.futures.Future()
        # One reader thread, below the event loop and the embedder in the CPU's queue: a reading
        # waiting for it when the engine's answer begins is dropped unread (speculation)
        self._reader = concurrent.futures.ThreadPoolExecutor(
            1, "verifier", initializer=lower_priority, initargs=(niceness,)
        )
        self._waiting: Turns[_Waiting] = Turns(QUEUED_PER_SCOPE)
        self._reading: asyncio.Future[list[Verdict]] | None = None  # the reader's, if busy
        self._lock = threading.Lock()
        self._started = False
        self.calls = 0  # lookups read
        self.pairs = 0  # pairs read
        self.steps: Counter[Step] = Counter()  # verdicts, by the step that gave them
        self.crowded = 0  # lookups not read: their scope had QUEUED_PER_SCOPE waiting

    @property
    def ready(self) -> bool:
        return self._model.done() and self._model.exception() is None

    @property
    def failed(self) -> BaseException | None:
        return self._model.exception() if self._model.done() else None

    def warm(self) -> None:
        with self._lock:
            if self._started:
                return
            self._started = True
        threading.Thread(target=self._load, name="verifier-load", daemon=True).start()

    def _load(self) -> None:
        try:
            self._model.set_result(self._factory())
        except Exception as exc:
            log.exception("cache: the answer verifier failed to load; no semantic hits")
            self._model.set_exception(exc)

    async def scores(self, question: str, stored: Sequence[str], scope: str = "") -> Scores:
        """For each stored question, how surely its answer answers `question` (`Verdict`), read
        in `scope`'s turn; Crowded when the scope has QUEUED_PER_SCOPE readings waiting."""
        self.warm()
        model = await asyncio.wrap_future(self._model)
        pairs = [(text, question) for text in stored]
        waiting = _Waiting(pairs, asyncio.get_running_loop().create_future())
        if not self._waiting.add(scope, waiting):
            self.crowded += 1
            raise Crowded(f"the verifier: {QUEUED_PER_SCOPE} readings already wait in its scope")
        self.calls += 1
        self.pairs += len(stored)
        self._hand_over(model)
        try:
            found = await waiting.verdicts
        except asyncio.CancelledError:
            self._waiting.withdraw(scope, waiting)  # never read, if it was still waiting
            raise
        self.steps.update(verdict.step for verdict in found)
        return np.array([verdict.score for verdict in found], dtype=np.float32)

    def _hand_over(self, model: ScoresPairs) -> None:
        """The reader, if free, takes the next reading whose lookup still wants it."""
        if self._reading is not None:
            return
        waiting = self._waiting.next()
        while waiting is not None and waiting.verdicts.done():  # cancelled meanwhile
            waiting = self._waiting.next()
        if waiting is None:
            return
        loop = asyncio.get_running_loop()
        self._reading = loop.run_in_executor(self._reader, verdicts, model, waiting.pairs)
        self._reading.add_done_callback(functools.partial(self._read, model, waiting))

    def _read(
        self, model: ScoresPairs, waiting: _Waiting, reading: asyncio.Future[list[Verdict]]
    ) -> None:
        """A reading is done: its verdicts to its lookup (if it still waits), the next one in."""
        self._reading = None
        if not waiting.verdicts.done():
            if reading.cancelled():
                waiting.verdicts.cancel()
            elif (error := reading.exception()) is not None:
                waiting.verdicts.set_exception(error)
            else:
                waiting.verdicts.set_result(reading.result())
        self._hand_over(model)
