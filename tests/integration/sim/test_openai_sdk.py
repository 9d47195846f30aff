"""The official openai SDK, sync and async, streamed and not, against `overspill sim` unchanged."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.processes import FAST_ENGINE, Process, sim

MODEL = "sim-model"


@pytest.fixture(scope="module")
def vllm() -> Iterator[Process]:
    with sim(
        "--personality", "vllm", "--model", MODEL, "--model", "alias", *FAST_ENGINE
    ) as process:
        yield process


def client(process: Process) -> openai.OpenAI:
    return openai.OpenAI(base_url=process.url + "/v1", api_key="unused", max_retries=0)


def async_client(process: Process) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=process.url + "/v1", api_key="unused", max_retries=0)


def ask(text: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "Be brief."}, {"role": "user", "content": text}]


def test_chat_non_streamed_has_content_and_usage(vllm: Process) -> None:
    reply = client(vllm).chat.completions.create(
        model=MODEL, messages=ask("hello"), max_tokens=12, temperature=0
    )
    assert reply.choices[0].message.role == "assistant"
    assert reply.choices[0].message.content
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage is not None
    assert reply.usage.completion_tokens == 12
    assert reply.usage.prompt_tokens > 5
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + 12


def test_max_completion_tokens_is_honoured(vllm: Process) -> None:
    reply = client(vllm).chat.completions.create(
        model=MODEL, messages=ask("hello"), max_completion_tokens=3, temperature=0
    )
    assert reply.usage is not None
    assert reply.usage.completion_tokens == 3


def test_chat_streamed_matches_non_streamed_for_same_seed(vllm: Process) -> None:
    api = client(vllm)
    whole = api.chat.completions.create(
        model=MODEL, messages=ask("tell me"), max_tokens=20, seed=7, temperature=0.8
    )
    stream = api.chat.completions.create(
        model=MODEL,
        messages=ask("tell me"),
        max_tokens=20,
        seed=7,
        temperature=0.8,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    finish = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    assert finish == ["length"]
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 20
    assert chunks[0].choices[0].delta.role == "assistant"


def test_answers_are_deterministic_per_prompt_and_differ_across_prompts(vllm: Process) -> None:
    api = client(vllm)

    def answer(text: str) -> str | None:
        reply = api.chat.completions.create(
            model=MODEL, messages=ask(text), max_tokens=15, temperature=0
        )
        return reply.choices[0].message.content

    assert answer("capital of France") == answer("capital of France")
    assert answer("capital of France") != answer("capital of Germany")


def test_sampling_without_seed_varies(vllm: Process) -> None:
    api = client(vllm)
    answers = {
        api.chat.completions.create(
            model=MODEL, messages=ask("poem"), max_tokens=15, temperature=1.0
        )
        .choices[0]
        .message.content
        for _ in range(3)
    }
    assert len(answers) > 1


def test_stop_string_ends_with_stop(vllm: Process) -> None:
    api = client(vllm)
    full = (
        api.chat.completions.create(model=MODEL, messages=ask("long"), max_tokens=40, temperature=0)
        .choices[0]
        .message.content
    )
    assert full is not None
    stop_word = full.split()[5]
    cut = api.chat.completions.create(
        model=MODEL, messages=ask("long"), max_tokens=40, temperature=0, stop=[stop_word]
    )
    assert cut.choices[0].finish_reason == "stop"
    assert cut.choices[0].message.content == full[: full.index(stop_word)]


def test_natural_length_without_max_tokens_finishes_with_stop(vllm: Process) -> None:
    reply = client(vllm).chat.completions.create(model=MODEL, messages=ask("hi"), temperature=0)
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage is not None
    assert 1 <= reply.usage.completion_tokens <= 192  # uniform around the default 128


def test_completions_streamed_and_not(vllm: Process) -> None:
    api = client(vllm)
    whole = api.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=10, seed=1)
    assert whole.choices[0].finish_reason == "length"
    assert whole.usage is not None
    assert whole.usage.completion_tokens == 10
    pieces = list(
        api.completions.create(
            model=MODEL, prompt="Once upon a time", max_tokens=10, seed=1, stream=True
        )
    )
    assert "".join(p.choices[0].text for p in pieces if p.choices) == whole.choices[0].text


def test_completions_default_max_tokens_is_16(vllm: Process) -> None:
    reply = client(vllm).completions.create(model=MODEL, prompt="x", temperature=0)
    assert reply.usage is not None
    assert reply.usage.completion_tokens == 16


def test_embeddings_and_models(vllm: Process) -> None:
    api = client(vllm)
    result = api.embeddings.create(model=MODEL, input=["a cat", "a dog"])
    assert len(result.data) == 2
    assert len(result.data[0].embedding) == 384
    assert result.usage.prompt_tokens == 4
    assert sorted(m.id for m in api.models.list()) == ["alias", MODEL]


def test_alias_served_by_same_engine(vllm: Process) -> None:
    reply = client(vllm).chat.completions.create(model="alias", messages=ask("x"), max_tokens=2)
    assert reply.model == "alias"


def test_unknown_model_is_404_model_not_found(vllm: Process) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        client(vllm).chat.completions.create(model="nope", messages=ask("x"))
    assert caught.value.code == "model_not_found"


def test_context_length_exceeded_is_400(vllm: Process) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client(vllm).chat.completions.create(model=MODEL, messages=ask("x"), max_tokens=9000)
    assert caught.value.code == "context_length_exceeded"


def test_request_id_is_echoed_and_names_the_completion(vllm: Process) -> None:
    response = httpx.post(
        vllm.url + "/v1/chat/completions",
        json={"model": MODEL, "messages": ask("x"), "max_tokens": 2},
        headers={"X-Request-ID": "trace-123"},
    )
    assert response.headers["x-request-id"] == "trace-123"
    assert response.json()["id"] == "chatcmpl-trace-123"


async def test_async_client_streamed_and_not(vllm: Process) -> None:
    api = async_client(vllm)
    reply = await api.chat.completions.create(
        model=MODEL, messages=ask("async"), max_tokens=8, temperature=0
    )
    assert reply.usage is not None
    assert reply.usage.completion_tokens == 8
    stream = await api.chat.completions.create(
        model=MODEL, messages=ask("async"), max_tokens=8, temperature=0, stream=True
    )
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == reply.choices[0].message.content
    await api.close()
