"""Tool calls and logprobs from `overspill sim`, read by the official openai SDK: whole and
streamed, on the vLLM personality and the cloud one (hosted API style)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from proxy.sim.tokens import count_tokens
from tests.processes import FAST_ENGINE, Process, sim

MODEL = "sim-model"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
                "hourly": {"type": "boolean"},
            },
            "required": ["city", "unit", "days"],
        },
    },
}
SEARCH = {"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}
TOOLS: Any = [WEATHER, SEARCH]


@pytest.fixture(scope="module", params=["vllm", "cloud"])
def engine(request: pytest.FixtureRequest) -> Iterator[Process]:
    flags = ("--personality", request.param, "--model", MODEL, *FAST_ENGINE)
    with sim(*flags, "--network-latency-ms", "0") as process:
        yield process


def client(process: Process) -> openai.OpenAI:
    return openai.OpenAI(base_url=process.url + "/v1", api_key="unused", max_retries=0)


def user(text: str) -> Any:
    return [{"role": "user", "content": text}]


def create(process: Process, **fields: Any) -> ChatCompletion:
    return client(process).chat.completions.create(model=MODEL, temperature=0, **fields)


def stream(process: Process, **fields: Any) -> list[ChatCompletionChunk]:
    return list(
        client(process).chat.completions.create(
            model=MODEL,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
            **fields,
        )
    )


def added_up(chunks: list[ChatCompletionChunk]) -> ChatCompletion:
    """The chunks as one completion, added up by the SDK's own accumulator."""
    state: ChatCompletionStreamState[None] = ChatCompletionStreamState()
    for chunk in chunks:
        state.handle_chunk(chunk)
    return state.current_completion_snapshot


def test_required_gives_a_tool_call_with_arguments_from_the_schema(engine: Process) -> None:
    reply = create(engine, messages=user("Hello"), tools=TOOLS, tool_choice="required")
    (choice,) = reply.choices
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    (call,) = choice.message.tool_calls or []
    assert call.type == "function"
    assert call.id.startswith("call_")
    assert call.function.name == "get_weather"  # the first tool: the message names none
    assert json.loads(call.function.arguments) == {
        "city": "example city",
        "unit": "celsius",
        "days": 1,
    }
    assert reply.usage is not None
    spent = count_tokens(call.function.name) + count_tokens(call.function.arguments)
    assert reply.usage.completion_tokens == spent  # counted like any answer's tokens


def test_a_streamed_call_adds_up_to_the_whole_one(engine: Process) -> None:
    fields: Any = {
        "messages": user("Please search"),
        "tools": TOOLS,
        "tool_choice": "required",
        "extra_headers": {"x-request-id": "same-id"},
    }
    whole = create(engine, **fields)
    chunks = stream(engine, **fields)
    calls = [c.choices[0].delta.tool_calls for c in chunks if c.choices]
    opening, *pieces = [call[0] for call in calls if call]
    assert (opening.index, opening.type, opening.id) == (0, "function", whole_call(whole).id)
    assert opening.function is not None
    assert (opening.function.name, opening.function.arguments) == ("search", "")
    assert all(p.id is None and p.function and p.function.name is None for p in pieces)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert [f for f in finishes if f] == ["tool_calls"]
    usage, whole_usage = chunks[-1].usage, whole.usage
    assert usage is not None
    assert whole_usage is not None  # cached_tokens differ: the first left its prefix behind
    assert (usage.prompt_tokens, usage.completion_tokens) == (
        whole_usage.prompt_tokens,
        whole_usage.completion_tokens,
    )
    assert usage.completion_tokens == len(pieces) + 1  # the name "search" is one token
    assert said(whole_call(added_up(chunks))) == said(whole_call(whole))


def said(call: Any) -> tuple[str, str, str, str]:
    return call.id, call.type, call.function.name, call.function.arguments


def whole_call(reply: ChatCompletion) -> Any:
    (call,) = reply.choices[0].message.tool_calls or []
    return call


def test_a_named_function_is_called(engine: Process) -> None:
    choice = {"type": "function", "function": {"name": "search"}}
    reply = create(engine, messages=user("weather?"), tools=TOOLS, tool_choice=choice)
    assert whole_call(reply).function.name == "search"
    assert whole_call(reply).function.arguments == "{}"


def test_auto_calls_what_the_user_names_then_answers_the_result_in_text(engine: Process) -> None:
    assert create(engine, messages=user("Hi"), tools=TOOLS).choices[0].message.tool_calls is None
    asked = user("What does get_weather say for Paris?")
    first = create(engine, messages=asked, tools=TOOLS)
    assert first.choices[0].finish_reason == "tool_calls"
    call = whole_call(first)
    turns = [
        *asked,
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 degrees"},
    ]
    second = create(engine, messages=turns, tools=TOOLS, max_tokens=8)
    assert second.choices[0].message.tool_calls is None
    assert second.choices[0].message.content
    assert first.usage is not None
    assert second.usage is not None
    # the call sent back is part of the prompt, and the engine still held it
    assert second.usage.prompt_tokens > first.usage.prompt_tokens + first.usage.completion_tokens
    details = second.usage.prompt_tokens_details
    assert details is not None
    assert details.cached_tokens
    assert details.cached_tokens > first.usage.prompt_tokens


def test_max_tokens_cuts_a_call_short(engine: Process) -> None:
    full = whole_call(create(engine, messages=user("x"), tools=TOOLS, tool_choice="required"))
    reply = create(engine, messages=user("x"), tools=TOOLS, tool_choice="required", max_tokens=9)
    assert reply.choices[0].finish_reason == "length"
    arguments = whole_call(reply).function.arguments
    assert full.function.arguments.startswith(arguments)
    assert count_tokens(arguments) == 9 - count_tokens("get_weather")


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"tool_choice": "required"}, "tool_choice"),
        (
            {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
            "tool_choice",
        ),
        ({"tools": [{"type": "function", "function": {"name": "a b"}}]}, "tools[0].function.name"),
        ({"top_logprobs": 2}, "logprobs"),
        ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ],
)
def test_bad_tools_and_logprobs_are_400s(engine: Process, fields: Any, param: str) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        create(engine, messages=user("hi"), **fields)
    body: Any = caught.value.body
    assert body["param"] == param


def test_logprobs_whole_and_streamed_are_the_same(engine: Process) -> None:
    fields: Any = {
        "messages": user("Tell me"),
        "logprobs": True,
        "top_logprobs": 3,
        "max_tokens": 6,
    }
    whole = create(engine, **fields)
    (choice,) = whole.choices
    assert choice.logprobs is not None
    content = choice.logprobs.content or []
    assert "".join(entry.token for entry in content) == choice.message.content
    assert all(len(entry.top_logprobs) == 3 for entry in content)
    assert all(entry.top_logprobs[0].token == entry.token for entry in content)
    assert all(entry.bytes == list(entry.token.encode()) for entry in content)
    streamed = added_up(stream(engine, **fields))
    assert streamed.choices[0].logprobs is not None
    assert streamed.choices[0].logprobs.content == content
    assert streamed.choices[0].message.content == choice.message.content
