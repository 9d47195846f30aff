"""A client leaving the proxy stops the engine's work: the upstream connection is closed at once.

The engine decodes in 10 ms steps and prefills long prompts in chunks of 64 tokens (~13 ms
steps), so the engine aborts a sequence within one step of the proxy dropping its connection.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.clients import send_raw
from tests.processes import Process, backend_toml, proxy, sim

PROFILE = ("--decode-base-ms", "10", "--prefill-ms-per-token", "0.2",
           "--max-batched-tokens", "64", "--max-seqs", "4")  # fmt: skip


@dataclass
class Stack:
    proxy: Process
    engine: Process

    def stats(self) -> dict[str, Any]:
        result: dict[str, Any] = httpx.get(self.engine.url + "/_sim/stats").json()
        return result


@pytest.fixture
def stack() -> Iterator[Stack]:
    with sim("--model", "m", *PROFILE) as engine:
        config = "[server]\nprobe_interval_s = 0.2\n" + backend_toml("e", "vllm", engine.url)
        with proxy(config) as p:
            yield Stack(p, engine)


def open_raw(url: str, body: dict[str, Any]) -> socket.socket:
    return send_raw(url, "/v1/chat/completions", body)


def wait_until(stack: Stack, predicate: Any, timeout: float = 2.0) -> float:
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if predicate(stack.stats()):
            return time.perf_counter() - start
        time.sleep(0.005)
    raise AssertionError(f"not within {timeout}s: {stack.stats()}")


def chat(content: str, stream: bool, max_tokens: int = 2000) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "stream": stream,
    }


def test_disconnect_mid_stream_aborts_within_100ms(stack: Stack) -> None:
    sock = open_raw(stack.proxy.url, chat("go", stream=True))
    assert b"data:" in sock.recv(4096) + sock.recv(4096)  # headers, then the first chunks
    wait_until(stack, lambda s: s["running"] == 1)
    sock.close()
    took = wait_until(stack, lambda s: s["aborted"] == 1 and s["running"] == 0)
    assert took < 0.1, f"aborted after {took * 1000:.0f} ms"


def test_disconnect_before_the_first_token_aborts_within_100ms(stack: Stack) -> None:
    sock = open_raw(stack.proxy.url, chat("word " * 4000, stream=True, max_tokens=5))
    wait_until(stack, lambda s: s["running"] == 1)  # prefilling: ~63 steps of ~13 ms
    sock.close()
    took = wait_until(stack, lambda s: s["aborted"] == 1 and s["running"] == 0)
    assert took < 0.1, f"aborted after {took * 1000:.0f} ms"
    assert stack.stats()["generation_tokens"] == 0


def test_disconnect_of_a_non_streamed_request_aborts(stack: Stack) -> None:
    sock = open_raw(stack.proxy.url, chat("go", stream=False))
    wait_until(stack, lambda s: s["running"] == 1)
    time.sleep(0.1)
    sock.close()
    took = wait_until(stack, lambda s: s["aborted"] == 1 and s["running"] == 0)
    assert took < 0.1, f"aborted after {took * 1000:.0f} ms"
    status = httpx.get(stack.proxy.url + "/admin/status").json()
    assert status["backends"][0]["in_flight"] == 0


def test_sdk_closing_a_stream_aborts(stack: Stack) -> None:
    import openai

    api = openai.OpenAI(base_url=stack.proxy.url + "/v1", api_key="x", max_retries=0)
    stream = api.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "go"}], max_tokens=2000, stream=True
    )
    for i, _ in enumerate(stream):
        if i == 5:
            break
    stream.close()
    wait_until(stack, lambda s: s["aborted"] == 1 and s["running"] == 0)
    assert stack.stats()["generation_tokens"] < 200
