"""A cache hit is the same answer, not only the same text (issue 18): through the real proxy, in
front of a simulator that answers with tool calls and logprobs, a hit equals the answer it was
stored from field by field (message, tool calls with their ids, names and arguments, finish
reason, usage, logprobs), whether the answer was stored and replayed whole or streamed.

Streams are reassembled by the openai SDK's own accumulator (ChatCompletionStreamState), the
way `client.chat.completions.stream(...)` adds chunks up for its users (its snapshot: the final
completion refuses a `length` finish, which these answers have).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import openai
import pytest
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletion

from tests.integration.sim.test_tools_and_logprobs import WEATHER  # the same tool, one place
from tests.processes import FAST_ENGINE, Process, backend_toml, proxy, sim
from tests.waits import status, wait_until

MODEL = "sim-model"
# Requests with tools are cacheable only with `tools = true`; the semantic layer is off so the
# test never waits for the embedding model (a request with tools uses the exact layer anyway).
CONFIG = "[server]\nprobe_interval_s = 0.2\n{backend}[cache]\ntools = true\nsemantic = false\n"

TOOL_CALL = {"tools": [WEATHER], "tool_choice": "required"}
LOGPROBS = {"logprobs": True, "top_logprobs": 3, "max_tokens": 12}
KINDS = {"tool call": TOOL_CALL, "logprobs": LOGPROBS}
# (the first request streams, the second streams)
DELIVERIES = {
    "whole-then-whole": (False, False),
    "streamed-then-streamed": (True, True),
    "whole-then-streamed": (False, True),
    "streamed-then-whole": (True, False),
}
_asked = itertools.count()


@dataclass(frozen=True)
class Stack:
    proxy: Process
    engine: Process

    def client(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.proxy.url + "/v1", api_key="k", max_retries=0)

    def received(self) -> int:
        return int(httpx.get(self.engine.url + "/_sim/stats").json()["requests"])

    def hits(self) -> int:
        return int(status(self.proxy.url)["cache"]["hits_exact"])

    def stored(self) -> None:
        """Answers are stored just after they are sent: wait until every miss's answer is."""

        def every_miss() -> bool:
            cache = status(self.proxy.url)["cache"]
            return bool(cache["stored"] >= cache["misses"])

        wait_until(every_miss, "every answer stored")


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    engine_started = sim("--personality", "vllm", "--model", MODEL, *FAST_ENGINE)
    with engine_started as engine, proxy(CONFIG.format(backend=backend(engine))) as p:
        yield Stack(p, engine)


def backend(engine: Process) -> str:
    return backend_toml("local", "vllm", engine.url)


@dataclass(frozen=True)
class Answer:
    """What a client reads of an answer, every field that must survive the cache."""

    model: str
    role: str
    content: str | None
    tool_calls: tuple[tuple[str, str, str, str], ...]  # id, type, name, arguments
    finish_reason: str
    usage: dict[str, Any] | None
    logprobs: dict[str, Any] | None


def answer_of(completion: ChatCompletion, streamed: bool) -> Answer:
    (choice,) = completion.choices
    message = choice.message
    calls = tuple(
        (call.id, call.type, call.function.name, call.function.arguments)
        for call in message.tool_calls or []
        if call.type == "function"
    )
    # A stream cannot say `content: null`: its role chunk carries "" (as vLLM's and OpenAI's
    # do), so a streamed answer without text reads as null, like the whole one.
    content = (message.content or None) if streamed else message.content
    return Answer(
        model=completion.model,
        role=message.role,
        content=content,
        tool_calls=calls,
        finish_reason=choice.finish_reason,
        usage=completion.usage.model_dump() if completion.usage else None,
        logprobs=choice.logprobs.model_dump() if choice.logprobs else None,
    )


def ask(stack: Stack, body: dict[str, Any], stream: bool) -> tuple[str, Answer]:
    """The answer through the proxy (reassembled when streamed) and its X-Overspill-Cache."""
    create = stack.client().chat.completions.with_streaming_response.create
    extra = {"stream": True, "stream_options": {"include_usage": True}} if stream else {}
    with create(model=MODEL, temperature=0, **body, **extra) as response:
        verdict = response.headers["x-overspill-cache"]
        if not stream:
            return verdict, answer_of(response.parse(), streamed=False)
        state: ChatCompletionStreamState[None] = ChatCompletionStreamState()
        for chunk in response.parse():
            state.handle_chunk(chunk)
    return verdict, answer_of(state.current_completion_snapshot, streamed=True)


def question(kind: str) -> list[dict[str, str]]:
    """A message no other request of the module sends: each case starts with a miss."""
    return [{"role": "user", "content": f"Question {next(_asked)} about the {kind}."}]


def replayed(stack: Stack, body: dict[str, Any], first: bool, second: bool) -> tuple[Answer, ...]:
    """The answer stored from the first request and the second request's, a hit that never
    reached the engine."""
    verdict, original = ask(stack, body, first)
    assert verdict == "miss"
    stack.stored()
    before, hits = stack.received(), stack.hits()
    verdict, again = ask(stack, body, second)
    assert verdict == "hit-exact"
    assert stack.received() == before  # the engine saw nothing of it
    assert stack.hits() == hits + 1
    return original, again


@pytest.mark.parametrize("delivery", DELIVERIES)
def test_a_hit_of_a_tool_call_is_the_same_answer(stack: Stack, delivery: str) -> None:
    body = {"messages": question("weather"), **TOOL_CALL}
    original, again = replayed(stack, body, *DELIVERIES[delivery])
    ((call_id, kind, name, arguments),) = original.tool_calls
    assert call_id.startswith("call_")
    assert (kind, name, original.finish_reason) == ("function", "get_weather", "tool_calls")
    assert arguments == '{"city":"example city","unit":"celsius","days":1}'
    assert original.content is None
    assert original.usage is not None
    assert again == original


@pytest.mark.parametrize("delivery", DELIVERIES)
def test_a_hit_with_logprobs_is_the_same_answer(stack: Stack, delivery: str) -> None:
    body = {"messages": question("logprobs"), **LOGPROBS}
    original, again = replayed(stack, body, *DELIVERIES[delivery])
    assert original.content
    assert original.logprobs is not None
    tokens = original.logprobs["content"]
    assert len(tokens) == 12
    assert "".join(token["token"] for token in tokens) == original.content
    assert all(len(token["top_logprobs"]) == 3 for token in tokens)
    assert original.usage is not None
    assert again == original


def test_a_stream_stored_without_usage_never_stands_in_for_an_answer_with_it(
    stack: Stack,
) -> None:
    """A stream whose client did not ask for usage is stored without it: it serves such streams,
    but a whole answer must say its usage, so a whole request misses once, and its own answer
    (with usage) replaces the stored one for every client after it."""
    body = {"messages": question("usage"), **TOOL_CALL}
    create = stack.client().chat.completions.create
    stream = create(model=MODEL, temperature=0, stream=True, **body)
    state: ChatCompletionStreamState[None] = ChatCompletionStreamState()
    for chunk in stream:
        state.handle_chunk(chunk)
    streamed = answer_of(state.current_completion_snapshot, streamed=True)
    assert streamed.usage is None
    stack.stored()
    create_raw = stack.client().chat.completions.with_streaming_response.create
    with create_raw(model=MODEL, temperature=0, stream=True, **body) as response:
        assert response.headers["x-overspill-cache"] == "hit-exact"  # a stream like the first
        again: ChatCompletionStreamState[None] = ChatCompletionStreamState()
        for chunk in response.parse():
            again.handle_chunk(chunk)
    assert answer_of(again.current_completion_snapshot, streamed=True) == streamed
    received = stack.received()
    verdict, whole = ask(stack, body, stream=False)
    assert verdict == "miss"
    assert stack.received() == received + 1
    assert whole.usage is not None
    assert [call[1:] for call in whole.tool_calls] == [call[1:] for call in streamed.tool_calls]
    stack.stored()
    verdict, replaced = ask(stack, body, stream=False)
    assert verdict == "hit-exact"
    assert replaced == whole


def test_a_whole_hit_is_the_stored_body_but_for_its_id_and_created(stack: Stack) -> None:
    """Beyond what the SDK reads: every key of the JSON body, nulls included."""
    body = {
        "model": MODEL,
        "messages": question("raw body"),
        "temperature": 0,
        "tools": [WEATHER],
        **LOGPROBS,
    }
    first = httpx.post(stack.proxy.url + "/v1/chat/completions", json=body, timeout=30)
    assert first.headers["x-overspill-cache"] == "miss"
    stack.stored()
    again = httpx.post(stack.proxy.url + "/v1/chat/completions", json=body, timeout=30)
    assert again.headers["x-overspill-cache"] == "hit-exact"
    original, hit = first.json(), again.json()
    assert original["choices"][0]["logprobs"]["content"]  # auto, and no tool named: text
    assert hit["id"] != original["id"]
    ignored = ("id", "created")
    assert {k: v for k, v in hit.items() if k not in ignored} == {
        k: v for k, v in original.items() if k not in ignored
    }


def test_a_whole_hit_from_a_stream_keeps_a_null_logprobs_key(stack: Stack) -> None:
    body = {"model": MODEL, "messages": question("null keys"), "temperature": 0, "max_tokens": 4}
    url = stack.proxy.url + "/v1/chat/completions"
    streamed = {**body, "stream": True, "stream_options": {"include_usage": True}}
    with httpx.stream("POST", url, json=streamed, timeout=30) as response:
        assert response.headers["x-overspill-cache"] == "miss"
        response.read()
    direct = httpx.post(stack.engine.url + "/v1/chat/completions", json=body, timeout=30)
    assert direct.json()["choices"][0]["logprobs"] is None  # what an engine says, whole
    stack.stored()
    hit = httpx.post(url, json=body, timeout=30)
    assert hit.headers["x-overspill-cache"] == "hit-exact"
    assert hit.json()["choices"][0]["message"] == direct.json()["choices"][0]["message"]
    assert "logprobs" in hit.json()["choices"][0]
