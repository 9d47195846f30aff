"""A client that goes away aborts its sequence at the next step, wherever it was waiting.

Every request here asks for an answer (or a prefill) that lasts far longer than the test can
take, so "aborted" can only mean the disconnect reached the engine: a request that ran to its
end would finish with "length". How soon the abort lands is a matter of speed, not asserted.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests import clients
from tests.processes import Process, engine_flags, sim
from tests.waits import wait_until

# Long prompts are prefilled in chunks of 256 tokens (~60 ms steps), so an abort lands quickly.
PROFILE = engine_flags(
    decode_base_ms=10, prefill_ms_per_token=0.2, max_batched_tokens=256, max_seqs=1
)
# 8,000 tokens at >= 10 ms a step: 80 s of decoding, more than any wait below allows.
LONG_ANSWER = 8000
# A prefill of ~30 s (7,000 tokens in 64-token steps of 266 ms): still under way whenever the
# client leaves, however slowly this machine gets there.
SLOW_PREFILL = engine_flags(
    decode_base_ms=10, prefill_ms_per_token=4, max_batched_tokens=64, max_seqs=1
)
LONG_PROMPT = "word " * 7000

Stats = dict[str, Any]


@pytest.fixture
def engine() -> Iterator[Process]:
    # --record: the request log shows when a request has arrived, before it reaches the engine.
    with sim("--model", "m", "--record", *PROFILE) as process:
        yield process


def stats(url: str) -> Stats:
    result: Stats = httpx.get(url + "/_sim/stats").json()
    return result


def wait_for(url: str, predicate: Callable[[Stats], bool], what: str) -> Stats:
    """The engine's stats once `predicate` holds of them."""

    def holding() -> Stats:
        now = stats(url)
        return now if predicate(now) else {}  # falsy: not yet

    return wait_until(holding, what)


def ran_to_its_end(engine_stats: Stats) -> int:
    finished: dict[str, int] = engine_stats["engines"]["m"]["finished"]
    return finished.get("length", 0) + finished.get("stop", 0)


def send_raw(url: str, body: dict[str, Any]) -> socket.socket:
    return clients.send_raw(url, "/v1/completions", body)


def test_disconnect_mid_stream_aborts(engine: Process) -> None:
    body = {"model": "m", "prompt": "x", "max_tokens": LONG_ANSWER, "stream": True}
    with httpx.stream("POST", engine.url + "/v1/completions", json=body) as response:
        lines = response.iter_lines()
        assert next(lines).startswith("data:")
        assert stats(engine.url)["running"] == 1
    ended = wait_for(engine.url, lambda s: s["running"] == 0, "nothing running")
    assert ended["aborted"] == 1
    assert ran_to_its_end(ended) == 0
    assert ended["generation_tokens"] < LONG_ANSWER


def test_disconnect_during_prefill_before_first_token_aborts() -> None:
    with sim("--model", "m", *SLOW_PREFILL) as engine:
        sock = send_raw(engine.url, {"model": "m", "prompt": LONG_PROMPT, "max_tokens": 5})
        prefilling = wait_for(engine.url, lambda s: s["running"] == 1, "one running")
        assert prefilling["generation_tokens"] == 0
        sock.close()
        ended = wait_for(engine.url, lambda s: s["running"] == 0, "nothing running")
    assert ended["aborted"] == 1
    assert ended["generation_tokens"] == 0
    assert ended["engines"]["m"]["prefill_tokens_computed"] < ended["engines"]["m"]["prompt_tokens"]


def test_disconnect_while_queued_aborts_the_waiting_sequence(engine: Process) -> None:
    busy = send_raw(engine.url, {"model": "m", "prompt": "x", "max_tokens": LONG_ANSWER})
    wait_for(engine.url, lambda s: s["running"] == 1, "one running")
    queued = send_raw(engine.url, {"model": "m", "prompt": "y", "max_tokens": LONG_ANSWER})
    wait_for(engine.url, lambda s: s["waiting"] == 1, "one waiting")
    queued.close()
    left = wait_for(engine.url, lambda s: s["waiting"] == 0, "nobody waiting")
    assert (left["aborted"], left["running"]) == (1, 1)  # the queued one; the busy one runs on
    busy.close()
    ended = wait_for(engine.url, lambda s: s["running"] == 0, "nothing running")
    assert ended["aborted"] == 2
    assert ran_to_its_end(ended) == 0


def test_disconnect_during_injected_hang_is_counted(engine: Process) -> None:
    httpx.post(engine.url + "/_sim/faults", json={"hang_s": 600})
    sock = send_raw(engine.url, {"model": "m", "prompt": "x", "max_tokens": 3})
    wait_until(
        lambda: httpx.get(engine.url + "/_sim/requests").json()["count"] == 1,
        "the request arrived (it hangs before the engine)",
    )
    sock.close()
    ended = wait_for(engine.url, lambda s: s["disconnects"] == 1, "a disconnect")
    assert ended["requests"] == 0  # it never reached the engine
