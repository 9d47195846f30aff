"""A cloud target with a format of its own still goes through litellm's translation: an
`anthropic/` model at a cloud-personality simulator speaking Anthropic's Messages API, through
real processes (the proxy with its local engine down, the simulator recording what it receives),
driven by the official openai SDK.

The client asks in OpenAI's format and gets OpenAI's format back, whole or streamed, with the
words the provider sent (the recorded request, sent to the simulator again directly, gives the
same words at temperature 0); the provider got Anthropic's format at /v1/messages (the system
prompt a top-level field, max_tokens, the operator's key in x-api-key and never the client's).
`wire = "auto"` takes OpenAI's wire only for openai/ models: this target is translated."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.processes import TEST_CLOUD_KEY, Process, backend_toml, engine_flags, proxy, sim

MODEL = "claude-haiku-4-5"  # priced in litellm's tables: the spend is counted
CLIENT_KEY = "sk-client-wxyz"
SYSTEM = "Answer in one short sentence."


def claude_toml(url: str, wire: str) -> str:
    # litellm's anthropic/ models take the API's root as api_base and add /v1/messages to it
    return (
        f'[[clouds]]\nname = "claude"\nmodel = "anthropic/{MODEL}"\napi_base = "{url}"\n'
        f'api_key_env = "TEST_CLOUD_KEY"\nwire = "{wire}"\n'
        '[[routes]]\nmodel = "m"\ncloud = ["claude"]\n'
    )


@pytest.fixture(scope="module")
def translated() -> Iterator[tuple[Process, Process]]:
    flags = engine_flags(personality="cloud", decode_base_ms=1, output_tokens=6)
    with sim(*flags, "--network-latency-ms", "0", "--model", MODEL) as cloud:
        down = backend_toml("gone", "vllm", "http://127.0.0.1:9", {"m": "m"})
        with proxy(down + claude_toml(cloud.url, "auto")) as p:
            yield p, cloud


def client(p: Process) -> openai.OpenAI:
    return openai.OpenAI(base_url=p.url + "/v1", api_key=CLIENT_KEY, max_retries=0)


def conversation(words: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": words}]


def last_received(cloud: Process) -> dict[str, Any]:
    got: dict[str, Any] = httpx.get(cloud.url + "/_sim/requests").json()["requests"][-1]
    return got


def sent_again(cloud: Process, received: dict[str, Any]) -> dict[str, Any]:
    """The provider's whole answer to the request it received, asked for directly."""
    body = {**received["body"], "stream": False}
    headers = {"x-api-key": "sk-direct", "anthropic-version": "2023-06-01"}
    answer = httpx.post(cloud.url + "/v1/messages", json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    message: dict[str, Any] = answer.json()
    return message


def spent(p: Process) -> float:
    families = text_string_to_metric_families(httpx.get(p.url + "/metrics").text)
    cost = next(f for f in families if f.name == "overspill_cloud_cost_usd")
    return float(cost.samples[0].value)


def test_a_whole_answer_comes_back_in_openais_format(translated: tuple[Process, Process]) -> None:
    p, cloud = translated
    before = spent(p)
    raw = client(p).chat.completions.with_raw_response.create(
        model="m", messages=conversation("Say hello."), temperature=0, max_tokens=40
    )
    assert raw.headers["x-overspill-route"] == "cloud/claude"
    completion = raw.parse()
    assert completion.object == "chat.completion"
    received = last_received(cloud)
    message = sent_again(cloud, received)
    assert message["type"] == "message"
    assert completion.choices[0].message.content == message["content"][0]["text"]
    assert completion.choices[0].finish_reason == "stop"  # Anthropic's end_turn
    assert completion.usage is not None
    assert completion.usage.prompt_tokens == message["usage"]["input_tokens"]
    assert completion.usage.completion_tokens == message["usage"]["output_tokens"]
    assert spent(p) > before  # priced by litellm's tables


def test_the_provider_receives_anthropics_format(translated: tuple[Process, Process]) -> None:
    p, cloud = translated
    client(p).chat.completions.create(
        model="m", messages=conversation("What is a queue?"), max_tokens=33, stop=["zzz"]
    )
    received = last_received(cloud)
    assert received["path"] == "/v1/messages"  # not /chat/completions: translated
    body = received["body"]
    assert body["model"] == MODEL  # the provider's own name, without litellm's prefix
    assert body["max_tokens"] == 33
    assert body["stop_sequences"] == ["zzz"]
    system = body["system"]  # top level, a string or text blocks
    assert (system if isinstance(system, str) else system[0]["text"]) == SYSTEM
    assert [m["role"] for m in body["messages"]] == ["user"]  # no system message
    headers = received["headers"]
    assert headers["anthropic-version"]
    assert headers["x-api-key"] == "…" + TEST_CLOUD_KEY[-4:]  # the operator's key
    assert "authorization" not in headers  # the client's key stays behind
    assert CLIENT_KEY[-4:] not in str(received)


def test_max_tokens_is_always_sent(translated: tuple[Process, Process]) -> None:
    """Anthropic requires it: litellm fills in the model's maximum when the client gave none."""
    p, cloud = translated
    client(p).chat.completions.create(model="m", messages=conversation("Hi."))
    max_tokens = last_received(cloud)["body"]["max_tokens"]
    assert isinstance(max_tokens, int)
    assert max_tokens > 0


def test_a_stream_comes_back_as_openai_chunks(translated: tuple[Process, Process]) -> None:
    p, cloud = translated
    stream = client(p).chat.completions.create(
        model="m",
        messages=conversation("Tell me about caches."),
        temperature=0,
        max_tokens=4,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    received = last_received(cloud)
    assert received["body"]["stream"] is True
    message = sent_again(cloud, received)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == message["content"][0]["text"]
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert [f for f in finishes if f] == ["length"]  # Anthropic's max_tokens: cut at 4
    usage = chunks[-1].usage
    assert usage is not None
    assert usage.completion_tokens == 4
    assert usage.prompt_tokens == message["usage"]["input_tokens"]
    assert chunks[-1].choices == []  # OpenAI's usage chunk has no choice (litellm's had one)


def test_a_stream_shows_usage_only_when_asked(translated: tuple[Process, Process]) -> None:
    p, _ = translated
    chunks = list(
        client(p).chat.completions.create(
            model="m", messages=conversation("Hi again."), max_tokens=3, stream=True
        )
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert all(c.usage is None for c in chunks)


def test_an_anthropic_error_comes_back_as_an_openai_error(
    translated: tuple[Process, Process],
) -> None:
    """OpenAI's temperature goes to 2, Anthropic's to 1: the provider's 400, in its own shape,
    reaches the client as OpenAI's error object with the provider's type and the proxy's words
    (the provider's go to the log: issue 30); a 4xx does not count against the target's
    breaker, so the tests after this one still reach it."""
    p, _ = translated
    for stream in (False, True):
        with pytest.raises(openai.BadRequestError) as caught:
            client(p).chat.completions.create(
                model="m", messages=conversation("Hot?"), temperature=1.5, stream=stream
            )
        body = caught.value.body
        assert isinstance(body, dict)
        # the provider's type, not litellm's wrapping of it; the proxy's words
        assert body["message"] == "claude answered 400"
        assert body["type"] == "invalid_request_error"
    assert client(p).chat.completions.create(model="m", messages=conversation("Still there?"))
