"""Which function a chat request calls, if any, and with what arguments (pure).

`tools` and `tool_choice` are checked as OpenAI checks them (a 400 names the field), then a
deterministic stand-in for a model's judgement decides, never a coin:

- no tools, or `tool_choice` "none": a text answer;
- `{"type": "function", "function": {"name": N}}`: a call of N;
- "required": a call of the function the last user message names, else of the first listed;
- "auto" (the default when tools are given): a call of the function the last message names
  when that message is the user's, else a text answer (so an agent loop ends: after a `tool`
  message the model answers in text).

A message names a function when the name appears in it as a word, its `_` and `-` read as
spaces too: "use get_weather" and "get weather for Paris" both name `get_weather`. An answer
makes one call (`parallel_tool_calls` is accepted; the simulator never calls twice), its
arguments made from the function's parameters (arguments.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from proxy.errors import BadRequest
from proxy.sim.arguments import arguments
from proxy.sim.tokens import ToolCall, message_text

# OpenAI's rule for a function's name.
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_MODES = ("none", "auto", "required")


@dataclass(frozen=True)
class Tool:
    name: str
    parameters: Any  # a JSON schema (an object), or None


def parse_tools(value: Any) -> tuple[Tool, ...]:
    """A body's `tools`: none, or function tools each with a valid name."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise BadRequest("'tools' must be an array", param="tools")
    return tuple(_tool(item, f"tools[{i}]") for i, item in enumerate(value))


def call_for(
    tools: tuple[Tool, ...], tool_choice: Any, messages: list[dict[str, Any]]
) -> ToolCall | None:
    """The call this request's answer makes, or None for a text answer."""
    chosen = choose(tools, tool_choice, messages)
    return ToolCall(chosen.name, arguments(chosen.parameters)) if chosen else None


def choose(
    tools: tuple[Tool, ...], tool_choice: Any, messages: list[dict[str, Any]]
) -> Tool | None:
    mode = _mode(tool_choice, tools)
    if mode == "none":
        return None
    if isinstance(mode, Tool):
        return mode
    last = messages[-1]
    named = next((t for t in tools if names(message_text(last), t.name)), None)
    if mode == "required":
        return named or tools[0]
    return named if last.get("role") == "user" else None


def names(text: str, name: str) -> bool:
    """Does `text` name the function `name` (as a word; `_`, `-` and spaces alike)?"""
    words = [re.escape(word) for word in re.split(r"[_\-\s]+", name) if word]
    if not words:
        return False
    pattern = r"(?<![\w-])" + r"[_\-\s]+".join(words) + r"(?![\w-])"
    return re.search(pattern, text, re.IGNORECASE) is not None


def _mode(tool_choice: Any, tools: tuple[Tool, ...]) -> str | Tool:
    """ "none", "auto", "required", or the named tool."""
    if tool_choice is None:
        return "auto" if tools else "none"
    if tool_choice in _MODES:
        if tool_choice == "required" and not tools:
            raise _without_tools()
        return str(tool_choice)
    if not isinstance(tool_choice, dict) or tool_choice.get("type") != "function":
        raise BadRequest(
            '\'tool_choice\' must be "none", "auto", "required" or '
            '{"type": "function", "function": {"name": ...}}',
            param="tool_choice",
        )
    function = tool_choice.get("function")
    name = function.get("name") if isinstance(function, dict) else None
    if not tools:
        raise _without_tools()
    for tool in tools:
        if tool.name == name:
            return tool
    raise BadRequest(
        f"Invalid value for 'tool_choice': no function named {name!r} in 'tools'",
        param="tool_choice",
    )


def _without_tools() -> BadRequest:
    return BadRequest(
        "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are "
        "specified.",
        param="tool_choice",
    )


def _tool(item: Any, where: str) -> Tool:
    if not isinstance(item, dict) or item.get("type") != "function":
        raise BadRequest(f"'{where}' must be a function tool", param=f"{where}.type")
    function = item.get("function")
    if not isinstance(function, dict):
        raise BadRequest(f"'{where}.function' must be an object", param=f"{where}.function")
    name = function.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise BadRequest(
            f"Invalid '{where}.function.name': letters, digits, '_' and '-', 1 to 64 of them",
            param=f"{where}.function.name",
        )
    parameters = function.get("parameters")
    if parameters is not None and not isinstance(parameters, dict):
        raise BadRequest(
            f"'{where}.function.parameters' must be an object",
            param=f"{where}.function.parameters",
        )
    return Tool(name, parameters)
