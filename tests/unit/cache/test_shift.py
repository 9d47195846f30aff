"""cache/shift.py: which CPU a measure of the int8 model belongs to, and measuring it again on
another one, once."""

from __future__ import annotations

from pathlib import Path

import pytest

from cache.encoders import Shift
from cache.shift import isa_signature, shift_here

AVX2 = (
    "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma bmi2\nprocessor\t: 1\nflags\t\t: fpu avx2\n"
)
VNNI = "flags\t\t: fpu avx2 fma avx512f avx512bw avx512vl avx512_vnni\n"
ARM = "Features\t: fp asimd asimddp i8mm\n"


def test_the_signature_names_the_kernel_instruction_sets_and_the_runtime() -> None:
    assert isa_signature(AVX2, "x86_64", "1.20.0") == "x86_64 onnxruntime-1.20.0 avx2 fma"
    assert isa_signature(VNNI, "x86_64", "1.20.0") != isa_signature(AVX2, "x86_64", "1.20.0")
    assert isa_signature(AVX2, "x86_64", "1.21.0") != isa_signature(AVX2, "x86_64", "1.20.0")
    assert isa_signature(ARM, "aarch64", "1.20.0") == "aarch64 onnxruntime-1.20.0 asimddp i8mm"
    assert isa_signature("", "x86_64", "1.20.0") == "x86_64 onnxruntime-1.20.0"


def written(cpu: str) -> Shift:
    return Shift(max=0.03, p99=0.02, pairs=241, cpu=cpu)


def never() -> Shift:
    raise AssertionError("measured again")


def test_a_measure_made_on_this_cpu_is_used_as_written(tmp_path: Path) -> None:
    assert shift_here(written("here"), tmp_path, "here", never) == written("here")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("cpu", ["elsewhere", ""])
def test_a_measure_from_another_cpu_is_made_again_here_once(tmp_path: Path, cpu: str) -> None:
    measures = [Shift(max=0.05, p99=0.03, pairs=241)]
    here = shift_here(written(cpu), tmp_path, "here", measures.pop)
    assert here == Shift(max=0.05, p99=0.03, pairs=241, cpu="here")
    assert shift_here(written(cpu), tmp_path, "here", never) == here  # kept, not measured again
    assert shift_here(written(cpu), tmp_path, "yet another", lambda: written("")) == Shift(
        max=0.03, p99=0.02, pairs=241, cpu="yet another"
    )
    assert len(list(tmp_path.glob("shift-*.json"))) == 2


def test_a_folder_it_cannot_write_to_costs_a_measure_at_each_start(tmp_path: Path) -> None:
    missing = tmp_path / "gone"
    assert shift_here(written("elsewhere"), missing, "here", lambda: written("")).cpu == "here"
    assert not missing.exists()
