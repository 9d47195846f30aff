"""The official ollama client against the ollama personality: native API, cold loads, LRU."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import ollama
import openai
import pytest

from tests.processes import FAST_ENGINE, Process, sim

LOAD_MS = 400


@pytest.fixture(scope="module")
def server() -> Iterator[Process]:
    args = ("--personality", "ollama", "--model", "llama3:8b", "--model", "qwen:7b")
    with sim(
        *args, "--model", "phi3:mini", "--max-loaded", "2", "--load-ms", str(LOAD_MS), *FAST_ENGINE
    ) as process:
        yield process


def test_chat_not_streamed(server: Process) -> None:
    client = ollama.Client(host=server.url)
    reply = client.chat(
        model="llama3:8b",
        messages=[{"role": "user", "content": "hello"}],
        options={"num_predict": 7, "temperature": 0},
    )
    assert reply.done is True
    assert reply.done_reason == "length"
    assert reply.message.role == "assistant"
    assert reply.message.content
    assert reply.eval_count == 7
    assert reply.prompt_eval_count is not None
    assert reply.prompt_eval_count > 3


def test_chat_streamed_matches_whole(server: Process) -> None:
    client = ollama.Client(host=server.url)
    messages = [{"role": "user", "content": "stream please"}]
    options = {"num_predict": 9, "seed": 3}
    whole = client.chat(model="llama3:8b", messages=messages, options=options)
    parts = list(client.chat(model="llama3:8b", messages=messages, options=options, stream=True))
    assert parts[-1].done is True
    assert parts[-1].eval_count == 9
    assert "".join(p.message.content or "" for p in parts) == whole.message.content
    assert sum(1 for p in parts if not p.done) == 9


def test_generate_streamed_and_not(server: Process) -> None:
    client = ollama.Client(host=server.url)
    options = {"num_predict": 5, "temperature": 0}
    whole = client.generate(model="llama3:8b", prompt="Why is the sky blue?", options=options)
    assert whole.done
    assert whole.eval_count == 5
    parts = list(
        client.generate(
            model="llama3:8b", prompt="Why is the sky blue?", options=options, stream=True
        )
    )
    assert "".join(p.response or "" for p in parts) == whole.response


def test_list_and_show(server: Process) -> None:
    client = ollama.Client(host=server.url)
    names = sorted(m.model or "" for m in client.list().models)
    assert names == ["llama3:8b", "phi3:mini", "qwen:7b"]
    assert client.show("qwen:7b").details is not None


def test_unknown_model_raises_response_error_404(server: Process) -> None:
    client = ollama.Client(host=server.url)
    with pytest.raises(ollama.ResponseError) as caught:
        client.chat(model="missing:1b", messages=[{"role": "user", "content": "x"}])
    assert caught.value.status_code == 404
    assert "missing:1b" in caught.value.error


def test_embed(server: Process) -> None:
    result = ollama.Client(host=server.url).embed(model="llama3:8b", input=["a", "b"])
    assert len(result.embeddings) == 2


def test_no_metrics_endpoint(server: Process) -> None:
    assert httpx.get(server.url + "/metrics").status_code == 404


def test_openai_compatible_endpoint(server: Process) -> None:
    api = openai.OpenAI(base_url=server.url + "/v1", api_key="ollama", max_retries=0)
    reply = api.chat.completions.create(
        model="llama3:8b", messages=[{"role": "user", "content": "hi"}], max_tokens=4
    )
    assert reply.usage is not None
    assert reply.usage.completion_tokens == 4


def loads(server: Process) -> int:
    """Models the simulator has loaded since it started (each load costs LOAD_MS)."""
    return int(httpx.get(server.url + "/_sim/stats").json()["loads"])


def test_cold_load_costs_load_time_and_lru_evicts(server: Process) -> None:
    """A cold model waits out its load (a lower bound: the simulator sleeps at least LOAD_MS); a
    warm one does not load again, which its counter and reply say rather than a stopwatch."""
    client = ollama.Client(host=server.url)

    def timed(model: str) -> tuple[float, int]:
        start = time.perf_counter()
        reply = client.generate(model=model, prompt="x", options={"num_predict": 1})
        return time.perf_counter() - start, reply.load_duration or 0

    timed("llama3:8b")  # loaded (maybe already)
    before = loads(server)
    _, warm_load = timed("llama3:8b")
    assert warm_load == 0
    assert loads(server) == before
    cold, cold_load = timed("phi3:mini")  # second slot, or evicts
    assert cold >= LOAD_MS / 1000
    assert cold_load >= LOAD_MS * 1e6 * 0.9
    assert loads(server) == before + 1
    timed("qwen:7b")  # max_loaded=2: evicts the least recently used (llama3:8b)
    loaded = [m.model for m in client.ps().models]
    assert loaded == ["qwen:7b", "phi3:mini"]
    again, _ = timed("llama3:8b")
    assert again >= LOAD_MS / 1000
    assert loads(server) == before + 3
    assert [m.model for m in client.ps().models] == ["llama3:8b", "qwen:7b"]


def test_ps_reports_expiry_and_vram(server: Process) -> None:
    client = ollama.Client(host=server.url)
    # The expiry is the last request's time plus keep_alive: bracketed by clock readings taken
    # around the calls, however long they take (1 s of slack: ps rounds, clocks differ).
    sent = time.time()
    client.generate(model="qwen:7b", prompt="x", options={"num_predict": 1}, keep_alive="10m")
    model = next(m for m in client.ps().models if m.model == "qwen:7b")
    listed = time.time()
    assert model.size_vram
    assert model.size_vram > 0
    assert model.expires_at is not None
    assert sent + 600 - 1 <= model.expires_at.timestamp() <= listed + 600 + 1


def test_keep_alive_zero_unloads_after_request(server: Process) -> None:
    client = ollama.Client(host=server.url)
    client.generate(model="phi3:mini", prompt="x", options={"num_predict": 1}, keep_alive=0)
    assert "phi3:mini" not in [m.model for m in client.ps().models]
