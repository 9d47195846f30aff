"""A drop-in base_url: the official openai SDK through the proxy to simulators, unchanged."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import openai
import pytest

from tests.processes import FAST_ENGINE, Process, backend_toml, proxy, sim
from tests.waits import in_flight, route_of, wait_until

PUBLIC = "llama"
ENGINE_MODEL = "meta-llama/Llama-3.1-8B-Instruct"


@dataclass
class Stack:
    proxy: Process
    engines: list[Process]

    def client(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.proxy.url + "/v1", api_key="x", max_retries=0)

    def recorded(self) -> list[dict[str, object]]:
        entries = []
        for engine in self.engines:
            entries += httpx.get(engine.url + "/_sim/requests").json()["requests"]
        return entries

    def clear(self) -> None:
        for engine in self.engines:
            httpx.delete(engine.url + "/_sim/requests")


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    args = ("--model", ENGINE_MODEL, "--record", *FAST_ENGINE)
    with sim(*args) as a, sim(*args) as b:
        config = "[server]\nprobe_interval_s = 0.2\n" + "".join(
            backend_toml(name, "vllm", e.url, {PUBLIC: ENGINE_MODEL})
            for name, e in (("vllm-a", a), ("vllm-b", b))
        )
        with proxy(config) as p:
            yield Stack(p, [a, b])


def ask(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def test_chat_content_and_usage_match_the_engine(stack: Stack) -> None:
    through = stack.client().chat.completions.create(
        model=PUBLIC, messages=ask("hello"), max_tokens=12, seed=3
    )
    direct = openai.OpenAI(base_url=stack.engines[0].url + "/v1", api_key="x").chat.completions
    expected = direct.create(model=ENGINE_MODEL, messages=ask("hello"), max_tokens=12, seed=3)
    assert through.choices[0].message.content == expected.choices[0].message.content
    assert through.usage is not None
    assert expected.usage is not None
    assert through.usage.completion_tokens == 12
    assert through.usage.prompt_tokens == expected.usage.prompt_tokens


def test_streamed_chat_with_usage(stack: Stack) -> None:
    chunks = list(
        stack.client().chat.completions.create(
            model=PUBLIC,
            messages=ask("stream"),
            max_tokens=10,
            seed=1,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    whole = stack.client().chat.completions.create(
        model=PUBLIC, messages=ask("stream"), max_tokens=10, seed=1
    )
    assert text == whole.choices[0].message.content
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 10


def test_completions_streamed_and_not(stack: Stack) -> None:
    api = stack.client()
    whole = api.completions.create(model=PUBLIC, prompt="Once", max_tokens=6, seed=2)
    parts = list(
        api.completions.create(model=PUBLIC, prompt="Once", max_tokens=6, seed=2, stream=True)
    )
    assert "".join(p.choices[0].text for p in parts if p.choices) == whole.choices[0].text
    assert whole.usage is not None
    assert whole.usage.completion_tokens == 6


def test_embeddings_and_models(stack: Stack) -> None:
    api = stack.client()
    assert len(api.embeddings.create(model=PUBLIC, input=["a", "b"]).data) == 2
    assert [m.id for m in api.models.list()] == [PUBLIC]


async def test_async_client_streamed_and_not(stack: Stack) -> None:
    api = openai.AsyncOpenAI(base_url=stack.proxy.url + "/v1", api_key="x", max_retries=0)
    reply = await api.chat.completions.create(
        model=PUBLIC, messages=ask("a"), max_tokens=5, temperature=0
    )
    stream = await api.chat.completions.create(
        model=PUBLIC, messages=ask("a"), max_tokens=5, temperature=0, stream=True
    )
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == reply.choices[0].message.content
    await api.close()


def test_unknown_fields_reach_the_engine_untouched(stack: Stack) -> None:
    stack.clear()
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    stack.client().chat.completions.create(
        model=PUBLIC,
        messages=ask("tools"),
        max_tokens=2,
        tools=tools,  # type: ignore[arg-type]
        response_format={"type": "json_object"},
        logprobs=True,
        seed=11,
        extra_body={"guided_choice": ["a", "b"], "top_k": 5},
    )
    (entry,) = stack.recorded()
    body = entry["body"]
    assert isinstance(body, dict)
    assert body["model"] == ENGINE_MODEL  # the public name mapped to the engine's
    assert body["tools"] == tools
    assert body["response_format"] == {"type": "json_object"}
    assert body["logprobs"] is True
    assert body["seed"] == 11
    assert body["guided_choice"] == ["a", "b"]
    assert body["top_k"] == 5


def test_request_id_and_route_headers(stack: Stack) -> None:
    stack.clear()
    response = httpx.post(
        stack.proxy.url + "/v1/chat/completions",
        json={"model": PUBLIC, "messages": ask("x"), "max_tokens": 2},
        headers={"X-Request-ID": "req-42"},
    )
    assert response.headers["x-request-id"] == "req-42"
    assert response.headers["x-overspill-route"] in ("local/vllm-a", "local/vllm-b")
    (entry,) = stack.recorded()
    assert entry["headers"]["x-request-id"] == "req-42"  # type: ignore[index]
    fresh = httpx.post(
        stack.proxy.url + "/v1/chat/completions",
        json={"model": PUBLIC, "messages": ask("x"), "max_tokens": 2},
    )
    assert len(fresh.headers["x-request-id"]) == 32


# 8,000 tokens at >= 2 ms a step: 16 s of answer, far longer than the test takes to look.
LONG_ANSWER = 8000


def test_streaming_is_incremental(stack: Stack) -> None:
    """The proxy relays chunks as they come: the first ones reach the client while the engine is
    still writing the answer, which a proxy that waited for the whole answer could not do."""
    body = {"model": PUBLIC, "messages": ask("slow"), "max_tokens": LONG_ANSWER, "stream": True}
    with httpx.stream("POST", stack.proxy.url + "/v1/chat/completions", json=body) as response:
        chunks = (line for line in response.iter_lines() if line.startswith("data: {"))
        received = [next(chunks) for _ in range(10)]
        backend = route_of(response).removeprefix("local/")
        engine = stack.engines[["vllm-a", "vllm-b"].index(backend)]
        writing = httpx.get(engine.url + "/_sim/stats").json()
    assert len(received) == 10
    assert writing["running"] == 1  # the answer was still being written
    # Leaving closed the stream; the proxy aborts it upstream (the next tests find it idle).
    wait_until(lambda: in_flight(stack.proxy.url, backend) == 0, "the stream is let go")


def test_health_endpoints_and_status(stack: Stack) -> None:
    assert httpx.get(stack.proxy.url + "/healthz").json() == {"status": "ok"}
    ready = httpx.get(stack.proxy.url + "/readyz")
    assert ready.status_code == 200
    assert sorted(ready.json()["usable"]) == ["vllm-a", "vllm-b"]
    status = httpx.get(stack.proxy.url + "/admin/status").json()
    names = [b["name"] for b in status["backends"]]
    assert names == ["vllm-a", "vllm-b"]
    first = status["backends"][0]
    assert first["kind"] == "vllm"
    assert first["url"] == stack.engines[0].url
    assert first["healthy"] is True
    assert first["models"] == {PUBLIC: ENGINE_MODEL}
    assert first["in_flight"] == 0
    assert first["load"]["waiting"] == 0
    assert first["load"]["kv_cache_usage"] is not None
