"""`overspill serve --demo`: engines and a cloud to try the proxy with, when none are configured.

Starts the simulators proxy/demo/config.py describes as child processes on free ports (all at
once: the start stays quick), writes the configuration that serves them to a temporary file, and
stops the children when the proxy stops.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from proxy.children import Child, overspill_command, started_all
from proxy.demo.config import CLOUD, CLOUD_KEY, CLOUD_KEY_ENV, ENGINES, cloud_sim_args, demo_config


@dataclass(frozen=True)
class DemoFleet:
    config_path: Path
    children: dict[str, Child]  # by backend or cloud target name


@contextlib.contextmanager
def demo_fleet(host: str, port: int) -> Iterator[DemoFleet]:
    commands = {engine.name: overspill_command(*engine.sim_args()) for engine in ENGINES}
    commands[CLOUD] = overspill_command(*cloud_sim_args())
    with contextlib.ExitStack() as stack:
        children = stack.enter_context(started_all(commands))
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="overspill-demo-")))
        path = folder / "overspill.toml"
        path.write_text(demo_config(host, port, {n: c.url for n, c in children.items()}))
        stack.enter_context(_environment(CLOUD_KEY_ENV, CLOUD_KEY))
        yield DemoFleet(path, children)


@contextlib.contextmanager
def _environment(name: str, value: str) -> Iterator[None]:
    """The cloud key, where the proxy reads every cloud key: in its own environment."""
    previous = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            del os.environ[name]
        else:
            os.environ[name] = previous
