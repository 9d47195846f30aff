"""A client leaving the proxy stops the engine's work: the proxy closes its upstream connection,
and the engine aborts the sequence at its next step.

Every answer asked for here (and the one long prefill) lasts far longer than the test can take,
so a sequence that ends aborted was cut short because its client left: had the proxy kept the
upstream connection open, it would have run to its end and finished with "length". How soon the
abort lands (within a step or two) is this machine's speed, and is not asserted.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.clients import send_raw
from tests.processes import Process, backend_toml, engine_flags, proxy, sim
from tests.waits import in_flight, wait_until

PROFILE = engine_flags(
    decode_base_ms=10, prefill_ms_per_token=0.2, max_batched_tokens=64, max_seqs=4
)
# 8,000 tokens at >= 10 ms a step: 80 s of decoding.
LONG_ANSWER = 8000
# ~30 s of prefill (7,000 tokens in 64-token steps of 266 ms): still under way when the client
# leaves, however slowly this machine gets there.
SLOW_PREFILL = engine_flags(
    decode_base_ms=10, prefill_ms_per_token=4, max_batched_tokens=64, max_seqs=4
)
LONG_PROMPT = "word " * 7000

Stats = dict[str, Any]


@dataclass
class Stack:
    proxy: Process
    engine: Process

    def stats(self) -> Stats:
        result: Stats = httpx.get(self.engine.url + "/_sim/stats").json()
        return result

    def wait_for(self, predicate: Callable[[Stats], bool], what: str) -> Stats:
        """The engine's stats once `predicate` holds of them."""

        def holding() -> Stats:
            now = self.stats()
            return now if predicate(now) else {}  # falsy: not yet

        return wait_until(holding, what)

    def ended(self) -> Stats:
        """The engine's stats once its one request has ended, one way or another."""
        return self.wait_for(lambda s: s["requests"] == 1 and s["running"] == 0, "it ended")


@contextlib.contextmanager
def stack_of(profile: tuple[str, ...]) -> Iterator[Stack]:
    with sim("--model", "m", *profile) as engine:
        config = "[server]\nprobe_interval_s = 0.2\n" + backend_toml("e", "vllm", engine.url)
        with proxy(config) as p:
            yield Stack(p, engine)


@pytest.fixture
def stack() -> Iterator[Stack]:
    with stack_of(PROFILE) as built:
        yield built


def open_raw(url: str, body: dict[str, Any]) -> socket.socket:
    return send_raw(url, "/v1/chat/completions", body)


def chat(content: str, stream: bool, max_tokens: int = LONG_ANSWER) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "stream": stream,
    }


def cut_short(stats: Stats) -> bool:
    """Its one sequence was aborted, never finished."""
    finished: dict[str, int] = stats["engines"]["m"]["finished"]
    return stats["aborted"] == 1 and finished.get("length", 0) + finished.get("stop", 0) == 0


def test_disconnect_mid_stream_aborts(stack: Stack) -> None:
    sock = open_raw(stack.proxy.url, chat("go", stream=True))
    assert b"data:" in sock.recv(4096) + sock.recv(4096)  # headers, then the first chunks
    stack.wait_for(lambda s: s["running"] == 1, "it runs")
    sock.close()
    assert cut_short(stack.ended())


def test_disconnect_before_the_first_token_aborts() -> None:
    with stack_of(SLOW_PREFILL) as slow:
        sock = open_raw(slow.proxy.url, chat(LONG_PROMPT, stream=True, max_tokens=5))
        prefilling = slow.wait_for(lambda s: s["running"] == 1, "it is prefilled")
        assert prefilling["generation_tokens"] == 0
        sock.close()
        ended = slow.ended()
    assert cut_short(ended)
    assert ended["generation_tokens"] == 0


def test_disconnect_of_a_non_streamed_request_aborts(stack: Stack) -> None:
    sock = open_raw(stack.proxy.url, chat("go", stream=False))
    stack.wait_for(lambda s: s["running"] == 1, "it runs")
    sock.close()
    assert cut_short(stack.ended())
    wait_until(lambda: in_flight(stack.proxy.url, "e") == 0, "the proxy lets it go")


def test_sdk_closing_a_stream_aborts(stack: Stack) -> None:
    import openai

    api = openai.OpenAI(base_url=stack.proxy.url + "/v1", api_key="x", max_retries=0)
    stream = api.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "go"}],
        max_tokens=LONG_ANSWER,
        stream=True,
    )
    for i, _ in enumerate(stream):
        if i == 5:
            break
    stream.close()
    ended = stack.ended()
    assert cut_short(ended)
    assert ended["generation_tokens"] < LONG_ANSWER
