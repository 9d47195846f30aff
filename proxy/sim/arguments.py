"""A tool call's arguments, made from the function's JSON-schema `parameters` (pure).

Deterministic: the same schema always gives the same arguments, so a request sent twice gets
the same call (a cache, a replay or a test can compare them). Only `required` properties are
filled, as a model fills what it must; each gets a plausible value of its type: the schema's
`default`, `const` or first `enum` value when it has one, else a value by type and format that
respects `minimum`/`maximum` and `minItems`/`maxItems`. Local `$ref`s (`#/$defs/...`, as
pydantic writes them) are followed; the first branch of `anyOf`/`oneOf`/`allOf` is taken.

Any JSON may arrive as a schema: what is not understood is read as an empty schema (a string),
never an error, and nesting stops at MAX_DEPTH (a recursive schema gives `null` there).
"""

from __future__ import annotations

import math
from typing import Any

import orjson

MAX_DEPTH = 8
MAX_ITEMS = 16  # an array's items, whatever its minItems says

# Values for a string property by its `format`, as a client would validate them.
_FORMATS = {
    "date": "2025-01-15",
    "date-time": "2025-01-15T09:30:00Z",
    "time": "09:30:00",
    "email": "user@example.com",
    "uri": "https://example.com",
    "url": "https://example.com",
    "uuid": "123e4567-e89b-42d3-a456-426614174000",
}
_PICKED = ("default", "const")


def arguments(parameters: Any) -> str:
    """The call's `arguments`: compact JSON, as OpenAI and vLLM send them."""
    root = parameters if isinstance(parameters, dict) else {}
    return orjson.dumps(_object(root, root, 0)).decode()


def value_of(schema: Any, root: dict[str, Any], depth: int, name: str = "value") -> Any:
    """A plausible value for one property called `name`."""
    if depth > MAX_DEPTH:
        return None
    schema = _resolved(schema, root, depth)
    for key in _PICKED:
        if key in schema:
            return schema[key]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    for key in ("anyOf", "oneOf", "allOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches:
            return value_of(branches[0], root, depth + 1, name)
    return _by_type(_type_of(schema), schema, root, depth, name)


def _by_type(kind: str, schema: dict[str, Any], root: dict[str, Any], depth: int, name: str) -> Any:
    if kind == "object":
        return _object(schema, root, depth)
    if kind == "array":
        return _array(schema, root, depth, name)
    if kind == "integer":
        value = _bounded(schema, 1)  # a fractional bound: the nearest integer inside it
        return math.ceil(value) if value > 1 else math.floor(value)
    if kind == "number":
        return _bounded(schema, 1.5)
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    fmt = schema.get("format")
    if isinstance(fmt, str) and fmt in _FORMATS:
        return _FORMATS[fmt]
    return "example " + name.replace("_", " ").strip()


def _object(schema: dict[str, Any], root: dict[str, Any], depth: int) -> dict[str, Any]:
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    required = schema.get("required")
    names = [n for n in required if isinstance(n, str)] if isinstance(required, list) else []
    return {n: value_of(properties.get(n), root, depth + 1, n) for n in dict.fromkeys(names)}


def _array(schema: dict[str, Any], root: dict[str, Any], depth: int, name: str) -> list[Any]:
    least, most = _count(schema.get("minItems"), 1), _count(schema.get("maxItems"), MAX_ITEMS)
    count = min(max(least, 1), most, MAX_ITEMS)
    return [value_of(schema.get("items"), root, depth + 1, name)] * count


def _bounded(schema: dict[str, Any], preferred: float) -> float:
    """`preferred`, moved inside the schema's bounds."""
    value = preferred
    low = _number(schema.get("minimum"), schema.get("exclusiveMinimum"))
    high = _number(schema.get("maximum"), schema.get("exclusiveMaximum"))
    if low is not None and value < low:
        value = low if "minimum" in schema else low + 1
    if high is not None and value > high:
        value = high if "maximum" in schema else high - 1
    return value


def _number(inclusive: Any, exclusive: Any) -> float | None:
    for bound in (inclusive, exclusive):
        if isinstance(bound, int | float) and not isinstance(bound, bool) and math.isfinite(bound):
            return bound
    return None


def _type_of(schema: dict[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, list):  # ["string", "null"]: the type that carries a value
        kinds = [k for k in kind if isinstance(k, str)]
        kind = next((k for k in kinds if k != "null"), kinds[0] if kinds else None)
    if isinstance(kind, str):
        return kind
    return "object" if isinstance(schema.get("properties"), dict) else "string"


def _resolved(schema: Any, root: dict[str, Any], depth: int) -> dict[str, Any]:
    """The schema a local `$ref` points to (followed MAX_DEPTH times at most)."""
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and depth <= MAX_DEPTH:
        schema = _pointed(schema["$ref"], root)
        depth += 1
    return schema if isinstance(schema, dict) and "$ref" not in schema else {}


def _pointed(ref: str, root: dict[str, Any]) -> Any:
    if not ref.startswith("#"):
        return None  # a remote schema is not fetched
    node: Any = root
    for part in ref[1:].split("/"):
        if not part:
            continue
        if not isinstance(node, dict):
            return None
        node = node.get(part.replace("~1", "/").replace("~0", "~"))
    return node


def _count(value: Any, otherwise: int) -> int:
    return max(value, 0) if isinstance(value, int) and not isinstance(value, bool) else otherwise
