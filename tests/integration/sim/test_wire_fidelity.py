"""Wire details the real engines showed (vLLM 0.32 CPU, measured here) and hosted APIs have."""

from __future__ import annotations

import json
import re

import httpx

from tests.processes import FAST_ENGINE, sim

BODY = {
    "model": "m",
    "messages": [{"role": "user", "content": "Hi"}],
    "max_tokens": 3,
    "stream": True,
    "stream_options": {"include_usage": True},
}


def events(url: str) -> list[dict[str, object]]:
    with httpx.stream("POST", url + "/v1/chat/completions", json=BODY) as response:
        lines = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(line) for line in lines[:-1]]


def test_vllm_stream_puts_finish_reason_on_the_last_token_and_omits_null_usage() -> None:
    with sim("--model", "m", *FAST_ENGINE) as engine:
        chunks = events(engine.url)
    choices = [c["choices"][0] for c in chunks if c["choices"]]  # type: ignore[index]
    # role chunk, three tokens (the last one carrying finish_reason), then the usage chunk
    assert [c["finish_reason"] for c in choices] == [None, None, None, "length"]  # type: ignore[index]
    assert choices[-1]["delta"]["content"]  # type: ignore[index]
    assert all("usage" not in c for c in chunks[:-1])
    assert chunks[-1]["usage"]["completion_tokens"] == 3  # type: ignore[index]


def test_cloud_stream_closes_with_an_empty_delta_and_null_usage() -> None:
    with sim(
        "--personality", "cloud", "--model", "m", "--network-latency-ms", "0", *FAST_ENGINE
    ) as cloud:
        chunks = events(cloud.url)
    choices = [c["choices"][0] for c in chunks if c["choices"]]  # type: ignore[index]
    assert [c["finish_reason"] for c in choices] == [None, None, None, None, "length"]  # type: ignore[index]
    assert choices[-1]["delta"] == {}  # type: ignore[index]
    assert all(c["usage"] is None for c in chunks[:-1])


def test_vllm_metrics_carry_cache_config_info() -> None:
    with sim("--model", "m", "--block-size", "128", "--kv-tokens", "23296") as engine:
        text = httpx.get(engine.url + "/metrics").text
    info = re.search(r"^vllm:cache_config_info\{(.*)\} 1\.0$", text, re.MULTILINE)
    assert info is not None
    assert 'block_size="128"' in info.group(1)
    assert 'num_gpu_blocks="182"' in info.group(1)
