"""Which function a chat request calls: `tools` and `tool_choice` checked as OpenAI checks them,
and a deterministic choice (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.errors import BadRequest
from proxy.sim.tokens import ToolCall
from proxy.sim.tools import Tool, call_for, choose, names, parse_tools

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
SEARCH = {"type": "function", "function": {"name": "search"}}
TOOLS = parse_tools([WEATHER, SEARCH])


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def chosen(tool_choice: Any, messages: list[dict[str, Any]], tools: Any = TOOLS) -> str | None:
    tool = choose(tools, tool_choice, messages)
    return tool.name if tool else None


def test_tools_are_parsed_with_their_parameters() -> None:
    weather, search = TOOLS
    assert weather == Tool("get_weather", WEATHER["function"]["parameters"])  # type: ignore[index]
    assert search == Tool("search", None)
    assert parse_tools(None) == parse_tools([]) == ()


@pytest.mark.parametrize(
    ("tools", "param"),
    [
        ({"type": "function"}, "tools"),
        ([{"function": {"name": "f"}}], "tools[0].type"),
        ([{"type": "custom", "custom": {"name": "f"}}], "tools[0].type"),
        ([{"type": "function"}], "tools[0].function"),
        ([{"type": "function", "function": {}}], "tools[0].function.name"),
        ([SEARCH, {"type": "function", "function": {"name": "a b"}}], "tools[1].function.name"),
        ([{"type": "function", "function": {"name": "x" * 65}}], "tools[0].function.name"),
        (
            [{"type": "function", "function": {"name": "f", "parameters": []}}],
            "tools[0].function.parameters",
        ),
    ],
)
def test_a_bad_tool_is_a_400_naming_it(tools: Any, param: str) -> None:
    with pytest.raises(BadRequest) as caught:
        parse_tools(tools)
    assert caught.value.param == param


def test_required_calls_the_named_function_else_the_first() -> None:
    assert chosen("required", user("hello")) == "get_weather"
    assert chosen("required", user("please search for it")) == "search"


def test_a_named_function_is_called_whatever_the_message() -> None:
    named = {"type": "function", "function": {"name": "search"}}
    assert chosen(named, user("what is the weather?")) == "search"


def test_none_never_calls() -> None:
    assert chosen("none", user("use get_weather")) is None


def test_auto_calls_a_function_the_users_last_message_names() -> None:
    assert chosen("auto", user("Use get_weather for Paris")) == "get_weather"
    assert chosen(None, user("get weather in Paris")) == "get_weather"  # auto by default
    assert chosen("auto", user("Hello there")) is None


def test_auto_answers_in_text_after_a_tool_result() -> None:
    turns = [
        *user("use get_weather"),
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "tool", "tool_call_id": "call_1", "content": "get_weather says: sunny"},
    ]
    assert chosen("auto", turns) is None
    assert chosen("required", turns) == "get_weather"  # required calls even then


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("use get_weather", True),
        ("GET WEATHER now", True),
        ("get-weather", True),
        ("get_weather_v2", False),
        ("forget weather", False),
        ("weather", False),
    ],
)
def test_a_function_is_named_as_a_word(text: str, named: bool) -> None:
    assert names(text, "get_weather") is named


@pytest.mark.parametrize(
    "tool_choice",
    ["sometimes", 3, {"type": "function"}, {"type": "other", "function": {"name": "search"}}],
)
def test_a_bad_tool_choice_is_a_400(tool_choice: Any) -> None:
    with pytest.raises(BadRequest) as caught:
        choose(TOOLS, tool_choice, user("hi"))
    assert caught.value.param == "tool_choice"


def test_an_unknown_function_is_a_400() -> None:
    with pytest.raises(BadRequest, match="nothing_like_it"):
        choose(TOOLS, {"type": "function", "function": {"name": "nothing_like_it"}}, user("hi"))


@pytest.mark.parametrize(
    "tool_choice", ["required", {"type": "function", "function": {"name": "f"}}]
)
def test_a_call_without_tools_is_a_400(tool_choice: Any) -> None:
    with pytest.raises(BadRequest, match="only allowed when 'tools' are specified"):
        choose((), tool_choice, user("hi"))


@pytest.mark.parametrize("tool_choice", [None, "none", "auto"])
def test_without_tools_an_answer_is_text(tool_choice: Any) -> None:
    assert choose((), tool_choice, user("use get_weather")) is None


def test_the_call_carries_arguments_from_the_parameters() -> None:
    assert call_for(TOOLS, "required", user("hi")) == ToolCall(
        "get_weather", '{"city":"example city"}'
    )
    assert call_for(TOOLS, "none", user("hi")) is None
