"""TOML -> Policy. Every problem is reported at once, each with its key path and line.

Unknown keys are errors, not silently ignored: a typo in a threshold must not quietly leave the
default in force. Names are checked across sections: a route's backends and cloud targets, the
clouds a privacy level allows, a tenant's level, a detector's level must all exist.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from policies.apikeys import FORMS, declared_digest
from policies.entities import ENTITY_DETECTORS
from policies.model import (
    UNVERIFIED_SEMANTIC_THRESHOLD,
    Auth,
    Backend,
    Balancing,
    BreakerSettings,
    CacheRule,
    CacheSettings,
    CloudTarget,
    Degrade,
    Limits,
    Overflow,
    Policy,
    Priorities,
    Priority,
    Privacy,
    PrivacyLevel,
    RetrySettings,
    Route,
    Server,
    Tenant,
    Timeouts,
)
from policies.pii import DETECTORS
from policies.reader import PolicyError, Problem, Reader
from policies.sections import (
    AUTH,
    BACKEND,
    BALANCING,
    BREAKER,
    CACHE,
    CACHE_RULE,
    CLOUD,
    DEFAULT_LEVELS,
    DEGRADE,
    LEVEL,
    LIMIT_KEYS,
    OVERFLOW,
    PRIORITIES,
    PRIORITY,
    PRIVACY,
    RETRY,
    ROUTE,
    SERVER,
    TENANT,
    TIMEOUTS,
    TOP_LEVEL,
)

__all__ = ["PolicyError", "Problem", "load_policy", "parse_policy"]


def load_policy(path: Path) -> Policy:
    try:
        text = path.read_text()
    except OSError as exc:
        raise PolicyError(str(path), [Problem("", f"cannot read: {exc.strerror}")]) from exc
    return parse_policy(text, str(path))


def parse_policy(
    text: str, source: str = "<policy>", environ: Mapping[str, str] | None = None
) -> Policy:
    """`environ` resolves keys declared as "env:VARIABLE" (default: this process's)."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = re.search(r"line (\d+)", str(exc))
        problem = Problem("", f"not valid TOML: {exc}", int(line.group(1)) if line else None)
        raise PolicyError(source, [problem]) from exc
    reader = _PolicyReader(text, os.environ if environ is None else environ)
    policy = reader.policy(document, source)
    if reader.problems:
        raise PolicyError(source, reader.problems)
    return policy


# The pattern detectors, then those that need the names model (the ner extra).
_KNOWN_DETECTORS = (*DETECTORS, *ENTITY_DETECTORS)


class _PolicyReader(Reader):
    def __init__(self, text: str, environ: Mapping[str, str]) -> None:
        super().__init__(text)
        self.environ = environ

    def policy(self, document: dict[str, Any], source: str) -> Policy:
        for key in document:
            if key not in TOP_LEVEL:
                self.problem(key, f"unknown section (expected one of {', '.join(TOP_LEVEL)})")
        backends = self.backends(document)
        clouds = tuple(
            CloudTarget(**self.fields(e, p, CLOUD)) for p, e in self.entries(document, "clouds")
        )
        self.unique([(f"clouds[{i}].name", c.name) for i, c in enumerate(clouds)], "cloud target")
        for i, cloud in enumerate(clouds):
            self.wire_speaks_openai(f"clouds[{i}].wire", cloud)
        privacy = self.privacy(document, {c.name for c in clouds})
        priorities = self.priorities(document)
        cache = self.cache(document)
        return Policy(
            server=Server(**self.table(document, "server", SERVER)),
            timeouts=Timeouts(**self.table(document, "timeouts", TIMEOUTS)),
            backends=backends,
            clouds=clouds,
            routes=self.routes(
                document, {b.name for b in backends}, {c.name for c in clouds}, cache.rule
            ),
            privacy=privacy,
            tenants=self.tenants(document, privacy, priorities),
            auth=self.auth(document),
            priorities=priorities,
            breaker=BreakerSettings(**self.table(document, "breaker", BREAKER)),
            retry=RetrySettings(**self.table(document, "retry", RETRY)),
            cache=cache,
            balancing=Balancing(**self.table(document, "balancing", BALANCING)),
            source=source,
        )

    def wire_speaks_openai(self, path: str, cloud: CloudTarget) -> None:
        """wire = "openai" relays OpenAI's format as it is, with the operator's key: a model of
        another provider would get a request it cannot read, and its key would go to whatever
        OpenAI-compatible address the call falls back on."""
        if cloud.wire == "openai" and not cloud.model.startswith("openai/"):
            provider = cloud.model.split("/", 1)[0]
            self.problem(
                path,
                f'"openai" relays OpenAI\'s wire format: the model must be openai/<name> (any '
                f"OpenAI-compatible host, with api_base); {provider}/ models go through "
                f'litellm (wire = "auto" or "litellm"), got {cloud.model!r}',
            )

    def backends(self, document: dict[str, Any]) -> tuple[Backend, ...]:
        if "backends" not in document:
            self.problem("backends", "at least one [[backends]] entry is required")
        backends = []
        for path, entry in self.entries(document, "backends"):
            values = self.fields(entry, path, BACKEND)
            values["models"] = self.models(values["models"], f"{path}.models")
            if values["url"]:
                values["url"] = values["url"].rstrip("/")
            backends.append(Backend(**values))
        self.unique([(f"backends[{i}].name", b.name) for i, b in enumerate(backends)], "backend")
        return tuple(backends)

    def models(self, raw: Any, path: str) -> dict[str, str] | None:
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

    def cache(self, document: dict[str, Any]) -> CacheSettings:
        values = self.table(document, "cache", CACHE)
        raw = document.get("cache")
        if not values["verifier"] and not (isinstance(raw, dict) and "threshold" in raw):
            values["threshold"] = UNVERIFIED_SEMANTIC_THRESHOLD
        rule = CacheRule(**{key: values.pop(key) for key in CACHE_RULE})
        return CacheSettings(**values, rule=rule)

    def route_cache(
        self, raw: dict[str, Any] | None, path: str, defaults: CacheRule
    ) -> CacheRule | None:
        """A route's cache rule: the [cache] defaults, with the keys the route sets replaced."""
        if raw is None:
            return None
        specs = {
            key: replace(spec, default=getattr(defaults, key)) for key, spec in CACHE_RULE.items()
        }
        return CacheRule(**self.fields(raw, path, specs))

    def routes(
        self, document: dict[str, Any], backends: set[str], clouds: set[str], cache: CacheRule
    ) -> tuple[Route, ...]:
        routes = []
        for path, entry in self.entries(document, "routes"):
            values = self.fields(entry, path, ROUTE)
            local = self.names(values["local"], f"{path}.local")
            cloud = self.names(values["cloud"], f"{path}.cloud")
            self.known(local, backends, f"{path}.local", "backend")
            self.known(cloud, clouds, f"{path}.cloud", "cloud target")
            overflow = Overflow(**self.fields(values["overflow"], f"{path}.overflow", OVERFLOW))
            rule = self.route_cache(values["cache"], f"{path}.cache", cache)
            degrade = Degrade(**self.fields(values["degrade"], f"{path}.degrade", DEGRADE))
            if degrade.model is not None and degrade.model == values["model"]:
                self.problem(f"{path}.degrade.model", "must be another model than the route's")
            routes.append(
                Route(values["model"], local, cloud, overflow, values["deadline_s"], rule, degrade)
            )
        self.unique([(f"routes[{i}].model", r.model) for i, r in enumerate(routes)], "route model")
        return tuple(routes)

    def privacy(self, document: dict[str, Any], clouds: set[str]) -> Privacy:
        values = self.table(document, "privacy", PRIVACY)
        levels = DEFAULT_LEVELS
        if values["levels"] is not None:
            levels = tuple(
                self.level(entry, f"privacy.levels[{i}]", clouds)
                for i, entry in enumerate(values["levels"])
            )
        names = {level.name for level in levels if level.name}
        self.unique(
            [(f"privacy.levels[{i}].name", lv.name or None) for i, lv in enumerate(levels)], "level"
        )
        if values["default"] not in names:
            self.problem(
                "privacy.default",
                f"unknown level {values['default']!r} (levels: {', '.join(names)})",
            )
        detectors = {}
        for detector, level in values["detectors"].items():
            path = f"privacy.detectors.{detector}"
            if detector not in _KNOWN_DETECTORS:
                known = ", ".join(_KNOWN_DETECTORS)
                self.problem(path, f"unknown detector (expected one of {known})")
            elif level not in names:
                self.problem(path, f"unknown level {level!r} (levels: {', '.join(sorted(names))})")
            else:
                detectors[detector] = level
        media = values["media"]
        if media is not None and media not in names:
            self.problem(
                "privacy.media", f"unknown level {media!r} (levels: {', '.join(sorted(names))})"
            )
            media = None
        return Privacy(
            levels,
            values["default"],
            detectors,
            media,
            values["send_user"],
            values["scan_timeout_s"],
        )

    def level(self, entry: Any, path: str, clouds: set[str]) -> PrivacyLevel:
        if not isinstance(entry, dict):
            self.problem(path, "must be a table {name = ..., cloud = ...}")
            return PrivacyLevel("", "none")
        values = self.fields(entry, path, LEVEL)
        cloud = values["cloud"]
        if isinstance(cloud, str) and cloud not in ("any", "none"):
            self.problem(
                f"{path}.cloud", f'expected "any", "none" or a list of names, got {cloud!r}'
            )
            cloud = "none"
        if isinstance(cloud, list):
            cloud = self.names(cloud, f"{path}.cloud")
            self.known(cloud, clouds, f"{path}.cloud", "cloud target")
        # a missing name is reported already
        return PrivacyLevel(values["name"] or "", cloud, values["cache"], values["redact"])

    def tenants(
        self, document: dict[str, Any], privacy: Privacy, priorities: Priorities
    ) -> tuple[Tenant, ...]:
        names = {level.name for level in privacy.levels}
        classes = {p.name for p in priorities.classes}
        tenants = []
        for path, entry in self.entries(document, "tenants"):
            values = self.fields(entry, path, TENANT)
            if values["privacy"] is not None and values["privacy"] not in names:
                known = ", ".join(sorted(names))
                self.problem(
                    f"{path}.privacy", f"unknown level {values['privacy']!r} (levels: {known})"
                )
            if values["priority"] is not None and values["priority"] not in classes:
                known = ", ".join(p.name for p in priorities.classes)
                self.problem(
                    f"{path}.priority", f"unknown class {values['priority']!r} (classes: {known})"
                )
            limits = Limits(*(values.pop(key) for key in LIMIT_KEYS))
            keys = self.keys(values.pop("api_keys"), f"{path}.api_keys")
            models = values.pop("models")
            models = None if models is None else self.names(models, f"{path}.models")
            tenants.append(Tenant(**values, api_keys=keys, limits=limits, models=models))
        self.unique([(f"tenants[{i}].name", t.name) for i, t in enumerate(tenants)], "tenant")
        owners: dict[str, str] = {}
        for i, tenant in enumerate(tenants):
            for key in tenant.api_keys:
                if owners.setdefault(key, tenant.name) != tenant.name:
                    other = owners[key]
                    self.problem(f"tenants[{i}].api_keys", f"also a key of tenant {other!r}")
        return tuple(tenants)

    def priorities(self, document: dict[str, Any]) -> Priorities:
        values = self.table(document, "priorities", PRIORITIES)
        classes: tuple[Priority, ...] = Priorities().classes
        if values["classes"] is not None:
            raw = values["classes"]
            if not raw or not all(isinstance(entry, dict) for entry in raw):
                self.problem("priorities.classes", "must be a non-empty array of tables")
            else:
                classes = tuple(
                    Priority(**self.fields(entry, f"priorities.classes[{i}]", PRIORITY))
                    for i, entry in enumerate(raw)
                )
                self.unique(
                    [(f"priorities.classes[{i}].name", p.name) for i, p in enumerate(classes)],
                    "priority class",
                )
        default = values["default"] or classes[0].name
        if default not in {p.name for p in classes}:
            known = ", ".join(p.name for p in classes)
            self.problem("priorities.default", f"unknown class {default!r} (classes: {known})")
            default = classes[0].name
        return Priorities(classes, default, values["aging_s"])

    def auth(self, document: dict[str, Any]) -> Auth:
        values = self.table(document, "auth", AUTH)
        admins = self.keys(values.pop("admin_keys"), "auth.admin_keys")
        return Auth(**values, admin_keys=admins)

    def keys(self, declared: list[Any], path: str) -> tuple[str, ...]:
        """The digests of declared keys; each bad declaration is a problem at its index (which
        names the form or the variable, never a key)."""
        digests = []
        for i, spec in enumerate(declared):
            try:
                if not isinstance(spec, str):
                    raise ValueError(f"expected {FORMS}, got {type(spec).__name__}")
                digests.append(declared_digest(spec, self.environ))
            except ValueError as error:
                self.problem(f"{path}[{i}]", str(error))
        return tuple(digests)

    def known(self, names: tuple[str, ...], defined: set[str], path: str, what: str) -> None:
        for name in names:
            if name not in defined:
                self.problem(
                    path,
                    f"unknown {what} {name!r} (defined: {', '.join(sorted(defined)) or 'none'})",
                )
