"""TOML -> Policy. Every problem is reported at once, each with its key path and line.

Unknown keys are errors, not silently ignored: a typo in a threshold must not quietly leave the
default in force.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from policies.locate import locate
from policies.model import BACKEND_KINDS, Backend, Policy, Server, Timeouts

_REQUIRED = object()


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
            f"{self.source}:{p.line or '?'}: {p.key}: {p.message}" if p.key else
            f"{self.source}:{p.line or '?'}: {p.message}"
            for p in self.problems
        )  # fmt: skip


@dataclass(frozen=True)
class Spec:
    kind: type | tuple[type, ...]
    expected: str
    default: Any = _REQUIRED
    check: Callable[[Any], str | None] | None = None  # returns what is wrong, or None


def _positive(value: Any) -> str | None:
    return None if value > 0 else "must be greater than 0"


def _port(value: Any) -> str | None:
    return None if 0 <= value <= 65535 else "must be a port number (0-65535)"


def _url(value: Any) -> str | None:
    return None if re.match(r"^https?://[^/\s]+", value) else "must be an http:// or https:// URL"


def _kind(value: Any) -> str | None:
    return None if value in BACKEND_KINDS else f"must be one of {', '.join(BACKEND_KINDS)}"


def _name(value: Any) -> str | None:
    ok = re.match(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", value)
    return None if ok else "must be letters, digits, '-', '_' or '.'"


def _level(value: Any) -> str | None:
    levels = ("debug", "info", "warning", "error")
    return None if value in levels else f"must be one of {', '.join(levels)}"


NUMBER = (int, float)
SERVER = {
    "host": Spec(str, "a string", "127.0.0.1"),
    "port": Spec(int, "an integer", 8080, _port),
    "max_body_bytes": Spec(int, "an integer", 4 * 1024 * 1024, _positive),
    "probe_interval_s": Spec(NUMBER, "a number of seconds", 1.0, _positive),
    "log_level": Spec(str, "a string", "info", _level),
}
TIMEOUTS = {
    name: Spec(NUMBER, "a number of seconds", default, _positive)
    for name, default in (("connect_s", 2.0), ("first_byte_s", 60.0), ("idle_s", 60.0),
                          ("total_s", 600.0))
}  # fmt: skip
BACKEND = {
    "name": Spec(str, "a string", check=_name),
    "kind": Spec(str, "a string", check=_kind),
    "url": Spec(str, "a string", check=_url),
    "models": Spec((list, dict), "a list of names or a table of public name = engine name", None),
    "max_concurrency": Spec(int, "an integer", None, _positive),
    "api_key_env": Spec(str, "an environment variable name", None),
}
TOP_LEVEL = ("server", "timeouts", "backends")


def load_policy(path: Path) -> Policy:
    try:
        text = path.read_text()
    except OSError as exc:
        raise PolicyError(str(path), [Problem("", f"cannot read: {exc.strerror}")]) from exc
    return parse_policy(text, str(path))


def parse_policy(text: str, source: str = "<policy>") -> Policy:
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = re.search(r"line (\d+)", str(exc))
        problem = Problem("", f"not valid TOML: {exc}", int(line.group(1)) if line else None)
        raise PolicyError(source, [problem]) from exc
    reader = _Reader(text)
    policy = reader.policy(document, source)
    if reader.problems:
        raise PolicyError(source, reader.problems)
    return policy


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.problems: list[Problem] = []

    def problem(self, key: str, message: str) -> None:
        self.problems.append(Problem(key, message, locate(self.text, key)))

    def policy(self, document: dict[str, Any], source: str) -> Policy:
        for key in document:
            if key not in TOP_LEVEL:
                self.problem(key, f"unknown section (expected one of {', '.join(TOP_LEVEL)})")
        server = Server(**self.table(document, "server", SERVER))
        timeouts = Timeouts(**self.table(document, "timeouts", TIMEOUTS))
        backends = self.backends(document.get("backends"))
        return Policy(server, timeouts, backends, source)

    def table(self, parent: Mapping[str, Any], key: str, specs: dict[str, Spec]) -> dict[str, Any]:
        raw = parent.get(key, {})
        if not isinstance(raw, dict):
            self.problem(key, "must be a table")
            raw = {}
        return self.fields(raw, key, specs)

    def fields(self, raw: Mapping[str, Any], path: str, specs: dict[str, Spec]) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for key in raw:
            if key not in specs:
                self.problem(f"{path}.{key}", f"unknown key (expected one of {', '.join(specs)})")
        for key, spec in specs.items():
            values[key] = self.value(raw, f"{path}.{key}", key, spec)
        return values

    def value(self, raw: Mapping[str, Any], path: str, key: str, spec: Spec) -> Any:
        if key not in raw:
            if spec.default is _REQUIRED:
                self.problem(path, f"is required ({spec.expected})")
            return None if spec.default is _REQUIRED else spec.default
        value = raw[key]
        if isinstance(value, bool) or not isinstance(value, spec.kind):
            self.problem(path, f"expected {spec.expected}, got {value!r}")
            return spec.default if spec.default is not _REQUIRED else None
        wrong = spec.check(value) if spec.check else None
        if wrong:
            self.problem(path, f"{wrong}, got {value!r}")
        if isinstance(value, int) and spec.kind == NUMBER:
            return float(value)
        return value

    def backends(self, raw: Any) -> tuple[Backend, ...]:
        if raw is None:
            self.problem("backends", "at least one [[backends]] entry is required")
            return ()
        if not isinstance(raw, list) or not all(isinstance(entry, dict) for entry in raw):
            self.problem("backends", "must be an array of tables ([[backends]])")
            return ()
        backends = []
        seen: set[str] = set()
        for i, entry in enumerate(raw):
            values = self.fields(entry, f"backends[{i}]", BACKEND)
            values["models"] = self.models(values["models"], f"backends[{i}].models")
            if values["name"] is not None and values["name"] in seen:
                self.problem(f"backends[{i}].name", f"duplicate backend name {values['name']!r}")
            seen.add(values["name"])
            if values["url"]:
                values["url"] = values["url"].rstrip("/")
            backends.append(Backend(**values))
        return tuple(backends)

    def models(self, raw: Any, path: str) -> Mapping[str, str] | None:
        if raw is None:
            return None
        if isinstance(raw, list):
            if not all(isinstance(name, str) and name for name in raw):
                self.problem(path, "every entry must be a non-empty model name")
                return None
            return {name: name for name in raw}
        if not all(isinstance(v, str) and v for v in raw.values()):
            self.problem(path, "every value must be the engine's model name (a string)")
            return None
        return dict(raw)
