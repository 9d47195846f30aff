"""A tool call's arguments made from a JSON schema: required properties only, plausible values by
type, deterministic, and never an error whatever the schema (pure)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.sim.arguments import MAX_ITEMS, arguments


def made(properties: dict[str, Any], required: list[str] | None = None) -> Any:
    schema = {"type": "object", "properties": properties, "required": required or [*properties]}
    return orjson.loads(arguments(schema))


def test_only_required_properties_are_filled() -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
        "required": ["city"],
    }
    assert arguments(schema) == '{"city":"example city"}'


def test_arguments_are_compact_json_in_the_order_required_names_them() -> None:
    assert arguments(
        {
            "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}},
            "required": ["b", "a"],
        }
    ) == ('{"b":true,"a":1}')


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"type": "string"}, "example first name"),
        ({"type": "integer"}, 1),
        ({"type": "number"}, 1.5),
        ({"type": "boolean"}, True),
        ({"type": "null"}, None),
        ({"type": ["null", "string"]}, "example first name"),
        ({}, "example first name"),
        ({"type": "string", "format": "date"}, "2025-01-15"),
        ({"type": "string", "format": "email"}, "user@example.com"),
        ({"type": "string", "enum": ["celsius", "fahrenheit"]}, "celsius"),
        ({"type": "string", "default": "metric"}, "metric"),
        ({"const": 42}, 42),
        ({"anyOf": [{"type": "integer"}, {"type": "string"}]}, 1),
    ],
)
def test_a_value_by_type_hint_and_format(schema: dict[str, Any], value: Any) -> None:
    assert made({"first_name": schema}) == {"first_name": value}


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"type": "integer", "minimum": 3}, 3),
        ({"type": "integer", "maximum": 0}, 0),
        ({"type": "integer", "exclusiveMaximum": 0}, -1),
        ({"type": "number", "minimum": 2.5, "maximum": 9}, 2.5),
        ({"type": "integer", "minimum": -5, "maximum": 5}, 1),
        ({"type": "integer", "minimum": 2.5}, 3),
        ({"type": "integer", "maximum": 0.5}, 0),
        ({"type": "integer", "minimum": float("inf")}, 1),
    ],
)
def test_numbers_keep_within_their_bounds(schema: dict[str, Any], value: Any) -> None:
    assert made({"n": schema}) == {"n": value}


def test_arrays_have_min_items_and_nested_objects_their_required_properties() -> None:
    tags = {"type": "array", "items": {"type": "string"}, "minItems": 2}
    point = {
        "type": "object",
        "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
        "required": ["x", "y"],
    }
    assert made({"tags": tags, "at": point}) == {
        "tags": ["example tags", "example tags"],
        "at": {"x": 1.5, "y": 1.5},
    }
    assert made({"none": {"type": "array", "maxItems": 0}}) == {"none": []}
    assert len(made({"many": {"type": "array", "minItems": 10_000}})["many"]) == MAX_ITEMS


def test_local_refs_are_followed_as_pydantic_writes_them() -> None:
    schema = {
        "$defs": {"Unit": {"type": "string", "enum": ["kelvin"]}},
        "type": "object",
        "properties": {"unit": {"$ref": "#/$defs/Unit"}, "other": {"$ref": "https://x/y"}},
        "required": ["unit", "other"],
    }
    assert orjson.loads(arguments(schema)) == {"unit": "kelvin", "other": "example other"}


def test_a_recursive_schema_ends() -> None:
    schema = {
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"child": {"$ref": "#/$defs/Node"}},
                "required": ["child"],
            }
        },
        "$ref": "#/$defs/Node",
        "properties": {"root": {"$ref": "#/$defs/Node"}},
        "required": ["root"],
    }
    text = arguments(schema)
    assert text.startswith('{"root":{"child":{"child":')
    assert "null" in text


def test_no_parameters_no_arguments() -> None:
    assert arguments(None) == "{}"
    assert arguments({"type": "object", "properties": {}}) == "{}"


# Whatever a body parsed by orjson may hold (its integers fit 64 bits).
json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats()
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=20,
)
keys = st.sampled_from(
    ["type", "properties", "required", "items", "enum", "$ref", "anyOf", "minItems", "minimum"]
)
schemas = st.recursive(
    st.dictionaries(keys, json, max_size=4),
    lambda inner: st.dictionaries(keys | st.text(max_size=4), inner | json, max_size=4),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(schema=schemas)
def test_any_schema_gives_json_arguments_and_the_same_ones_again(schema: dict[str, Any]) -> None:
    text = arguments(schema)
    assert isinstance(orjson.loads(text), dict)
    assert arguments(schema) == text
