"""A small declarative TOML validator: every problem collected, each with key path and line.

Specs say what a key must be (type, default, extra check); the Reader walks tables and arrays of
tables with them and records every problem instead of stopping at the first, so an admin fixes a
file in one pass.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from policies.locate import locate

REQUIRED = object()
NUMBER = (int, float)


@dataclass(frozen=True)
class Problem:
    key: str
    message: str
    line: int | None = None


class PolicyError(Exception):
    """A policy file that cannot be used; `problems` lists everything wrong with it."""

    def __init__(self, source: str, problems: list[Problem]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(self.report())

    def report(self) -> str:
        return "\n".join(
            f"{self.source}:{p.line or '?'}: {p.key}: {p.message}"
            if p.key
            else f"{self.source}:{p.line or '?'}: {p.message}"
            for p in self.problems
        )


@dataclass(frozen=True)
class Spec:
    kind: type | tuple[type, ...]
    expected: str
    default: Any = REQUIRED
    check: Callable[[Any], str | None] | None = None  # returns what is wrong, or None
    secret: bool = False  # may hold a key written by mistake: a problem never shows the value


class Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.problems: list[Problem] = []

    def problem(self, key: str, message: str) -> None:
        self.problems.append(Problem(key, message, locate(self.text, key)))

    def table(self, parent: Mapping[str, Any], key: str, specs: dict[str, Spec]) -> dict[str, Any]:
        """A table's fields (defaults for a missing table)."""
        raw = parent.get(key, {})
        if not isinstance(raw, dict):
            self.problem(key, "must be a table")
            raw = {}
        return self.fields(raw, key, specs)

    def entries(self, parent: Mapping[str, Any], key: str) -> list[tuple[str, dict[str, Any]]]:
        """An array of tables ([[key]]) as (path, table) pairs; [] when absent."""
        raw = parent.get(key)
        if raw is None:
            return []
        if not isinstance(raw, list) or not all(isinstance(entry, dict) for entry in raw):
            self.problem(key, f"must be an array of tables ([[{key}]])")
            return []
        return [(f"{key}[{i}]", entry) for i, entry in enumerate(raw)]

    def fields(self, raw: Mapping[str, Any], path: str, specs: dict[str, Spec]) -> dict[str, Any]:
        for key in raw:
            if key not in specs:
                self.problem(f"{path}.{key}", f"unknown key (expected one of {', '.join(specs)})")
        return {key: self.value(raw, f"{path}.{key}", key, spec) for key, spec in specs.items()}

    def value(self, raw: Mapping[str, Any], path: str, key: str, spec: Spec) -> Any:
        fallback = None if spec.default is REQUIRED else spec.default
        if key not in raw:
            if spec.default is REQUIRED:
                self.problem(path, f"is required ({spec.expected})")
            return fallback
        value = raw[key]
        got = f"{type(value).__name__} (not shown)" if spec.secret else repr(value)
        wants_bool = spec.kind is bool
        if isinstance(value, bool) != wants_bool or not isinstance(value, spec.kind):
            self.problem(path, f"expected {spec.expected}, got {got}")
            return fallback
        wrong = spec.check(value) if spec.check else None
        if wrong:
            self.problem(path, f"{wrong}, got {got}")
            return fallback
        if isinstance(value, int) and spec.kind == NUMBER:
            return float(value)
        return value

    def names(self, value: Any, path: str) -> tuple[str, ...]:
        """A list of non-empty strings."""
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            self.problem(path, f"expected a list of names, got {value!r}")
            return ()
        return tuple(value)

    def unique(self, names: list[tuple[str, str | None]], what: str) -> None:
        """Report every (path, name) whose name was seen before."""
        seen: set[str] = set()
        for path, name in names:
            if name is not None and name in seen:
                self.problem(path, f"duplicate {what} name {name!r}")
            if name is not None:
                seen.add(name)
