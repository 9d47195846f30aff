"""`overspill serve --demo`: local engines to try the proxy with, when none are configured.

Starts two vLLM-personality simulators and one Ollama-personality simulator as child processes on
free ports, all serving the public model `llama-3.1-8b` (the Ollama one also serves
`qwen2.5:7b`), writes the configuration it used to a temporary file, and stops the children when
the proxy stops.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from proxy.children import Child, overspill_command, started

PUBLIC_MODEL = "llama-3.1-8b"

_ENGINES = (
    ("vllm-a", "vllm", {PUBLIC_MODEL: "meta-llama/Llama-3.1-8B-Instruct"}),
    ("vllm-b", "vllm", {PUBLIC_MODEL: "meta-llama/Llama-3.1-8B-Instruct"}),
    ("ollama-1", "ollama", {PUBLIC_MODEL: "llama3.1:8b", "qwen2.5:7b": "qwen2.5:7b"}),
)


@dataclass(frozen=True)
class DemoFleet:
    config_path: Path
    children: dict[str, Child]


def _sim_command(kind: str, models: dict[str, str]) -> list[str]:
    args = ["sim", "--port", "0", "--personality", kind]
    for engine_name in dict.fromkeys(models.values()):
        args += ["--model", engine_name]
    return overspill_command(*args)


def demo_config(host: str, port: int, urls: dict[str, str]) -> str:
    lines = [
        "# Written by `overspill serve --demo`: simulators started for this run.",
        "[server]",
        f'host = "{host}"',
        f"port = {port}",
        "probe_interval_s = 0.5",
        "",
    ]
    for name, kind, models in _ENGINES:
        table = ", ".join(f'"{public}" = "{engine}"' for public, engine in models.items())
        lines += [
            "[[backends]]",
            f'name = "{name}"',
            f'kind = "{kind}"',
            f'url = "{urls[name]}"',
            f"models = {{ {table} }}",
            "",
        ]
    return "\n".join(lines)


@contextlib.contextmanager
def demo_fleet(host: str, port: int) -> Iterator[DemoFleet]:
    with contextlib.ExitStack() as stack:
        children = {
            name: stack.enter_context(started(_sim_command(kind, models)))
            for name, kind, models in _ENGINES
        }
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="overspill-demo-")))
        path = folder / "overspill-demo.toml"
        path.write_text(demo_config(host, port, {n: c.url for n, c in children.items()}))
        yield DemoFleet(path, children)
