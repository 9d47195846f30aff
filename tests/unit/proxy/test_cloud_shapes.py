"""proxy/legs/cloud_shapes.py: a parameter a provider would refuse for its type is refused
before the call, by name, never echoing the client's value."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.errors import BadRequest
from proxy.legs.cloud_params import outbound
from proxy.legs.cloud_shapes import SHAPES, check_shapes

WELL_FORMED: dict[str, Any] = {
    "temperature": 0.2,
    "top_p": 1,
    "max_tokens": 16,
    "n": 1,
    "seed": 7,
    "stop": ["\n", "END"],
    "logprobs": True,
    "top_logprobs": 2,
    "logit_bias": {"50256": -100},
    "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}},
    "tools": [{"type": "function", "function": {"name": "f"}}],
    "tool_choice": "auto",
    "parallel_tool_calls": False,
    "stream_options": {"include_usage": True},
    "user": "u-1",
}


def refused(params: dict[str, Any]) -> BadRequest:
    with pytest.raises(BadRequest) as caught:
        check_shapes(params)
    return caught.value


def test_well_formed_parameters_pass() -> None:
    check_shapes(WELL_FORMED)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("response_format", "bob's patient: Jane Roe"),
        ("response_format", {"json_schema": {}}),  # no type
        ("temperature", "0.2"),
        ("temperature", True),  # JSON's true is not a number to a provider
        ("max_tokens", 1.5),
        ("n", "2"),
        ("stop", ["ok", 3]),
        ("tools", {"type": "function"}),
        ("tool_choice", 1),
        ("logit_bias", [1, 2]),
        ("parallel_tool_calls", "yes"),
        ("stream_options", True),
        ("prompt", []),
        ("prompt", [[]]),
        ("prompt", [1, "two"]),
        ("input", []),
    ],
)
def test_a_parameter_of_the_wrong_type_is_refused_by_name(name: str, value: Any) -> None:
    error = refused({**WELL_FORMED, name: value})
    assert error.status == 400
    assert error.param == name
    assert error.code == "invalid_type"


def test_the_error_names_the_type_never_the_value() -> None:
    error = refused({"response_format": "bob's patient: Jane Roe"})
    assert "Jane Roe" not in error.render().decode()
    assert "got a string" in error.message


def test_null_is_a_parameter_left_out() -> None:
    check_shapes(dict.fromkeys(SHAPES))


@pytest.mark.parametrize("prompt", ["Say hi", ["a", "b"], [1, 2, 3], [[1, 2], [3]]])
def test_every_prompt_form_openai_takes_passes(prompt: Any) -> None:
    check_shapes({"prompt": prompt})


def test_outbound_refuses_before_anything_is_built() -> None:
    with pytest.raises(BadRequest) as caught:
        outbound("chat", {"model": "m", "messages": [], "response_format": "text"})
    assert caught.value.param == "response_format"


def test_a_dropped_field_is_not_checked() -> None:
    """Fields that never travel are not the provider's to refuse."""
    sent = outbound("chat", {"model": "m", "messages": [], "metadata": "not an object"})
    assert "metadata" in sent.dropped
