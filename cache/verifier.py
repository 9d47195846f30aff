"""The answer verifier: does the answer to a stored question answer the one asked? A cosine of
two sentence embeddings cannot see one plain word swapped for another ("a quick lasagne recipe"
vs "a one-pot lasagne recipe" score 0.93), nor can the guard's word tables see a word they do
not list. A cross-encoder reads both questions at once, token against token, so it can.

The model is made once (cache/verifier_training.py, in a child process: torch never enters a
server) and served here on ONNX Runtime, one thread. The cache consults it only for the
candidates that passed the similarity threshold and the guard: a clear miss, most lookups, never
pays for it. A candidate it reads costs as little as its verdict allows (`verdicts`): an int8
copy's reading first, which alone refuses a pair it puts far enough below the boundary
(cache/verifier_fast.py measures how far int8 strays), then fp32 one way, then the other way.
Most candidates are other questions, and most of those are refused by the first, cheapest step;
only a pair served pays for every step, and fp32's verdict is always the one that serves it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import math
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt

from cache.encoders import TOKENIZER_FILE, EmbedderError, load_tokenizer, padded
from cache.verifier_fast import FAST_FILE, current, read_margin

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

    async def scores(self, question: str, stored: Sequence[str]) -> Scores: ...


class OnnxVerifier:
    """An exported cross-encoder: "[CLS] a [SEP] b [SEP]". fp32 reads a batch in one padded run
    (padding is masked out: a pair's score does not depend on its batch-mates); int8 one pair a
    run, as its activations are quantised per tensor, batch-mates and all."""

    def __init__(self, session: Any, tokenizer: Any, batched: bool = True) -> None:
        self._session = session
        self._tokenizer = tokenizer
        self._batched = batched

    def scores(self, pairs: Sequence[tuple[str, str]]) -> Scores:
        if not pairs:
            return np.empty(0, dtype=np.float32)
        if not self._batched:
            return np.concatenate([self._run([pair]) for pair in pairs])
        return self._run(pairs)

    def _run(self, pairs: Sequence[tuple[str, str]]) -> Scores:
        feed = padded(self._tokenizer.encode_batch(list(pairs)))
        (probabilities,) = self._session.run(["paraphrase"], feed)
        result: Scores = np.asarray(probabilities, dtype=np.float32).reshape(len(pairs))
        return result


def agreement(model: ScoresPairs, pairs: Sequence[tuple[str, str]]) -> Scores:
    """How surely one answer serves both questions of each pair: the lower of the two readings,
    stored question first and asked question first, in one batch. The relation is symmetric and
    the model is not: one order alone served "a one-pot shakshuka recipe" for "a spicy" one (p
    0.84; 0.06 the other way). Both readings cost two runs a pair, and served no near-miss of
    the 328 labelled ones where one reading served 2 at the same boundary (README, "The answer
    verifier")."""
    if not pairs:
        return np.empty(0, dtype=np.float32)
    both = model.scores([*pairs, *((b, a) for a, b in pairs)])
    lower: Scores = np.minimum(both[: len(pairs)], both[len(pairs) :])
    return lower


@dataclass(frozen=True)
class Models:
    """What reads a pair: `exact` (fp32) gives every verdict that serves; `fast` (int8), when
    there is one, refuses alone a pair it reads more than `margin` (in logits) below the
    boundary, a distance int8 was measured never to move a reading by half of
    (cache/verifier_fast.py)."""

    exact: ScoresPairs
    fast: ScoresPairs | None = None
    margin: float = math.inf


Step = Literal["fast", "one_way", "both_ways"]
STEPS: tuple[Step, ...] = ("fast", "one_way", "both_ways")


@dataclass(frozen=True)
class Verdict:
    """`score`: the agreement (`agreement`), or for a pair refused at an earlier `step` the
    reading that refused it (below AGREES either way)."""

    score: float
    step: Step


def logit(probability: float) -> float:
    clipped = min(max(probability, 1e-7), 1 - 1e-7)
    return math.log(clipped / (1 - clipped))


def refused_fast(probability: float, margin: float) -> bool:
    """The fast reading alone says no: it lies more than `margin` logits below the boundary."""
    return logit(probability) < logit(AGREES) - margin


def verdicts(models: Models, pairs: Sequence[tuple[str, str]]) -> list[Verdict]:
    """`agreement`'s decision for each (stored, asked) pair at the least cost: each step reads
    only the pairs the steps before could not refuse. fp32 one way below AGREES is a refusal
    whatever the other way says (the agreement is the lower of the two), so the decisions are
    `agreement`'s exactly, but for a fast refusal, which the margin keeps to pairs fp32 refuses."""
    found: dict[int, Verdict] = {}
    if models.fast is not None and math.isfinite(models.margin) and pairs:
        for row, score in enumerate(models.fast.scores(pairs)):
            if refused_fast(float(score), models.margin):
                found[row] = Verdict(float(score), "fast")
    rows = [row for row in range(len(pairs)) if row not in found]
    first = dict(zip(rows, _scores(models.exact, [pairs[row] for row in rows]), strict=True))
    for row, score in first.items():
        if score < AGREES:
            found[row] = Verdict(score, "one_way")
    rows = [row for row in rows if row not in found]
    other = _scores(models.exact, [(pairs[row][1], pairs[row][0]) for row in rows])
    for row, score in zip(rows, other, strict=True):
        found[row] = Verdict(min(first[row], score), "both_ways")
    return [found[row] for row in range(len(pairs))]


def _scores(model: ScoresPairs, pairs: Sequence[tuple[str, str]]) -> list[float]:
    return [float(score) for score in model.scores(pairs)] if pairs else []


def load_verifier(folder: Path) -> Models:
    """Blocks for a second or so: call it off the event loop. The fast copy is used when it is
    there and measured (made with the verifier: cache/verifier_model.py)."""
    model = folder / MODEL_FILE
    if not model.is_file():
        raise EmbedderError(
            f"the answer verifier is not in {folder}: make it once with `overspill verifier` "
            "(scripts/setup does)"
        )
    tokenizer = load_tokenizer(folder / TOKENIZER_FILE)
    exact = OnnxVerifier(session(model), tokenizer)
    margin = read_margin(folder)
    if margin is None or not current(folder, MODEL_FILE):  # none, or another verifier's
        return Models(exact)
    fast = OnnxVerifier(session(folder / FAST_FILE), tokenizer, batched=False)
    return Models(exact, fast, margin)


def session(model: Path) -> Any:
    import onnxruntime  # type: ignore[import-untyped]

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    return onnxruntime.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])


class Verifier:
    """The async front: the models load (made first, if they must be: minutes) in a daemon
    thread of their own, so neither a lookup nor a proxy's exit waits for them; verdicts run in
    a worker thread, so a lookup waits for them without holding the event loop."""

    def __init__(self, factory: Callable[[], Models]) -> None:
        self._factory = factory
        self._models: concurrent.futures.Future[Models] = concurrent.futures.Future()
        self._lock = threading.Lock()
        self._started = False
        self.calls = 0  # lookups read
        self.pairs = 0  # pairs read
        self.steps: Counter[Step] = Counter()  # verdicts, by the step that gave them

    @property
    def ready(self) -> bool:
        return self._models.done() and self._models.exception() is None

    @property
    def failed(self) -> BaseException | None:
        return self._models.exception() if self._models.done() else None

    @property
    def fast(self) -> bool | None:
        """Whether an int8 reading comes first (None until the models are loaded)."""
        return self._models.result().fast is not None if self.ready else None

    def warm(self) -> None:
        with self._lock:
            if self._started:
                return
            self._started = True
        threading.Thread(target=self._load, name="verifier-load", daemon=True).start()

    def _load(self) -> None:
        try:
            self._models.set_result(self._factory())
        except Exception as exc:
            log.exception("cache: the answer verifier failed to load; no semantic hits")
            self._models.set_exception(exc)

    async def scores(self, question: str, stored: Sequence[str]) -> Scores:
        """For each stored question, how surely its answer answers `question` (`Verdict`)."""
        self.warm()
        models = await asyncio.wrap_future(self._models)
        self.calls += 1
        self.pairs += len(stored)
        pairs = [(text, question) for text in stored]
        found = await asyncio.to_thread(verdicts, models, pairs)
        self.steps.update(verdict.step for verdict in found)
        return np.array([verdict.score for verdict in found], dtype=np.float32)
