"""proxy/legs/backends.py's probes: a backend that answers its probe late keeps its traffic
until it stays silent; one that refuses, or one never seen up, is down at once. The engine
client is scripted (no sockets)."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from policies.model import Backend, Timeouts
from proxy.errors import UpstreamNotConnected, UpstreamTimeout
from proxy.legs.answer import Answer
from proxy.legs.backends import SLOW_PROBES_TO_DOWN, BackendMonitor, Backends

MODELS = b'{"data": [{"id": "m"}]}'


class ProbedEngine:
    """Answers GET /v1/models as scripted: "ok", "slow" (a timeout) or "refused"."""

    timeouts = Timeouts()

    def __init__(self, script: list[str]) -> None:
        self.script = script

    async def open(
        self, backend: str, url: str, body: bytes, headers: Mapping[str, str], stream: bool
    ) -> Answer:
        raise AssertionError("probes only")

    async def get(self, url: str, limit_s: float) -> tuple[int, bytes]:
        outcome = self.script.pop(0)
        if outcome == "slow":
            raise UpstreamTimeout(f"{url}: no answer within {limit_s:g}s")
        if outcome == "refused":
            raise UpstreamNotConnected("engine: cannot connect (refused)")
        return 200, MODELS

    async def close(self) -> None:
        pass


async def probed(script: list[str]) -> list[bool]:
    """The backend's health after each probe of the script."""
    backends = Backends((Backend("e", "openai", "http://e.invalid"),), ProbedEngine(script), 1.0)
    monitor: BackendMonitor = backends["e"]
    health = []
    for _ in range(len(script)):
        await backends.probe(monitor)
        health.append(monitor.healthy)
    return health


async def test_late_probes_keep_a_healthy_backend_until_it_stays_silent() -> None:
    script = ["ok", *["slow"] * SLOW_PROBES_TO_DOWN]
    health = await probed(script)
    assert health == [True] * SLOW_PROBES_TO_DOWN + [False]


async def test_a_good_probe_between_late_ones_starts_the_count_again() -> None:
    script = ["ok", "slow", "slow", "ok", "slow", "slow"]
    assert await probed(script) == [True] * 6


@pytest.mark.parametrize("first", ["slow", "refused"])
async def test_a_backend_never_seen_up_is_down_at_the_first_failure(first: str) -> None:
    assert await probed([first]) == [False]


async def test_a_refusal_is_down_at_once() -> None:
    assert await probed(["ok", "refused", "ok"]) == [True, False, True]
