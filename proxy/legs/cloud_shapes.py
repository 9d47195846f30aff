"""The shapes of the OpenAI parameters a cloud call carries, checked before anything leaves (pure).

A provider refuses a parameter of the wrong type with a 400, and so should we, before the call:
relayed as bytes (`wire = "openai"`), a malformed body would reach a provider that may answer it
anyway, or bill for its refusal; through litellm, it fails while the call is being built. Either
way the caller learns the same: `invalid_type`, naming the parameter, never its value (a body's
text is a client's, and may be personal). Only what a provider checks is checked here: the
parameters' JSON types, and prompts and inputs that hold nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from proxy.errors import BadRequest

Check = Callable[[Any], bool]


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _object(value: Any) -> bool:
    return isinstance(value, dict)


def _boolean(value: Any) -> bool:
    return isinstance(value, bool)


def _string(value: Any) -> bool:
    return isinstance(value, str)


def _objects(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _stop(value: Any) -> bool:
    return _string(value) or _strings(value)


def _choice(value: Any) -> bool:
    return _string(value) or _object(value)


def _format(value: Any) -> bool:
    return _object(value) and _string(value.get("type"))


def _token_ids(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(_integer(item) for item in value)


def _prompt(value: Any) -> bool:
    """A string, strings, token IDs or arrays of token IDs, and not nothing."""
    if _string(value):
        return True
    if not isinstance(value, list) or not value:
        return False
    return _strings(value) or _token_ids(value) or all(_token_ids(item) for item in value)


def _logprobs(value: Any) -> bool:  # chat: a boolean; completions: how many
    return _boolean(value) or _integer(value)


# (check, what a caller is told it should be)
SHAPES: Mapping[str, tuple[Check, str]] = {
    "frequency_penalty": (_number, "a number"),
    "presence_penalty": (_number, "a number"),
    "temperature": (_number, "a number"),
    "top_p": (_number, "a number"),
    "logit_bias": (_object, "an object"),
    "logprobs": (_logprobs, "a boolean or an integer"),
    "top_logprobs": (_integer, "an integer"),
    "n": (_integer, "an integer"),
    "best_of": (_integer, "an integer"),
    "seed": (_integer, "an integer"),
    "max_tokens": (_integer, "an integer"),
    "max_completion_tokens": (_integer, "an integer"),
    "dimensions": (_integer, "an integer"),
    "stop": (_stop, "a string or an array of strings"),
    "stream_options": (_object, "an object"),
    "user": (_string, "a string"),
    "safety_identifier": (_string, "a string"),
    "prompt_cache_key": (_string, "a string"),
    "reasoning_effort": (_string, "a string"),
    "verbosity": (_string, "a string"),
    "encoding_format": (_string, "a string"),
    "suffix": (_string, "a string"),
    "echo": (_boolean, "a boolean"),
    "parallel_tool_calls": (_boolean, "a boolean"),
    "response_format": (_format, "an object with a string 'type'"),
    "tools": (_objects, "an array of objects"),
    "functions": (_objects, "an array of objects"),
    "tool_choice": (_choice, "a string or an object"),
    "function_call": (_choice, "a string or an object"),
    "modalities": (_strings, "an array of strings"),
    "audio": (_object, "an object"),
    "prediction": (_object, "an object"),
    "web_search_options": (_object, "an object"),
    "prompt": (_prompt, "a non-empty string, array of strings or array of token IDs"),
    "input": (_prompt, "a non-empty string, array of strings or array of token IDs"),
}


def check_shapes(params: Mapping[str, Any]) -> None:
    """Raise a 400 for the first parameter a provider would refuse for its type. `null` passes:
    OpenAI reads it as the parameter left out."""
    for name, value in params.items():
        shape = SHAPES.get(name)
        if shape is None or value is None:
            continue
        fits, expected = shape
        if not fits(value):
            raise BadRequest(
                f"Invalid type for '{name}': expected {expected}, got {_json_type(value)}",
                param=name,
                code="invalid_type",
            )


def _json_type(value: Any) -> str:
    """The JSON type of a value (its type only: the value is the client's, and may be private)."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an empty array" if not value else "an array"
    return "an object"
