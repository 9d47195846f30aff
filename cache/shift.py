"""How far the int8 encoder moves a similarity from its referee's, on the CPU that serves.

The export measures it where it runs (cache/onnx_model.py), and the referee's margin is sized
from it (cache/referee.py). But ONNX Runtime picks its int8 kernels by the instructions the CPU
has (AVX2, AVX-512, VNNI, AMX), and they round differently: a model folder made on one machine
and served on another (an image built in CI, a home shared between hosts) would size the margin
from another CPU's measure. So each measure names the CPU it was made on (`isa_signature`), and
a model served on another is measured again there, once (seconds, in the embedder's thread), and
kept beside the model (`shift-<signature>.json`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import platform
from collections.abc import Callable
from pathlib import Path

from cache.encoders import Shift
from cache.files import atomic_file

log = logging.getLogger("overspill")

# The instruction sets ONNX Runtime's int8 (MLAS) kernels choose between on x86 and Arm.
KERNEL_FLAGS = frozenset(
    {
        "avx2",
        "fma",
        "avx512f",
        "avx512bw",
        "avx512vl",
        "avx512_vnni",
        "avx_vnni",
        "amx_int8",
        "amx_tile",
        "asimddp",
        "i8mm",
        "sve",
    }
)


def isa_signature(cpuinfo: str, machine: str, runtime: str) -> str:
    """The CPU as far as int8 results depend on it: its architecture, the kernel instruction
    sets it has (from /proc/cpuinfo's flags or features) and the ONNX Runtime that picks them."""
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in ("flags", "Features"):
            flags.update(value.split())
    return " ".join([machine, f"onnxruntime-{runtime}", *sorted(flags & KERNEL_FLAGS)])


def cpu_signature() -> str:
    import onnxruntime  # type: ignore[import-untyped]

    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:  # not Linux: the architecture and the runtime only
        cpuinfo = ""
    return isa_signature(cpuinfo, platform.machine(), onnxruntime.__version__)


def shift_here(written: Shift, folder: Path, signature: str, measure: Callable[[], Shift]) -> Shift:
    """`written` (the export's measure) when it was made on this CPU; else the measure kept
    for this CPU beside the model, or `measure()` now, kept for the next start."""
    if written.cpu == signature:
        return written
    kept = folder / f"shift-{hashlib.sha256(signature.encode()).hexdigest()[:16]}.json"
    try:
        shift = Shift(**json.loads(kept.read_text()))
        if shift.cpu == signature:
            return shift
    except (OSError, ValueError, TypeError):
        pass
    log.warning(
        "embedder: the int8 model in %s was measured on another CPU (%s); measuring it on this "
        "one (%s), once",
        folder,
        written.cpu or "not recorded",
        signature,
    )
    shift = dataclasses.replace(measure(), cpu=signature)
    _keep(kept, shift)
    return shift


def _keep(path: Path, shift: Shift) -> None:
    """Beside the model, for the next start; a folder this process cannot write (or that is
    gone) means measuring again at the next start, not a failure."""
    try:
        with atomic_file(path, make_folder=False) as out:
            out.write(json.dumps(dataclasses.asdict(shift)).encode())
    except OSError as exc:
        log.warning("embedder: could not keep the measure in %s: %s", path, exc)
