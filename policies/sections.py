"""Every key each section of the policy file accepts: its type, its default and its check.
policies/loader.py reads a file against these tables; a key not in them is an error."""

from __future__ import annotations

import re
from dataclasses import fields
from typing import Any

from policies.apikeys import FORMS
from policies.budget import PERIODS
from policies.model import BACKEND_KINDS, STRATEGIES, CacheRule, Limits, PrivacyLevel
from policies.reader import NUMBER, Spec


def _positive(value: Any) -> str | None:
    return None if value > 0 else "must be greater than 0"


def _non_negative(value: Any) -> str | None:
    return None if value >= 0 else "must not be negative"


def _share(value: Any) -> str | None:
    return None if 0 < value <= 1 else "must be in (0, 1]"


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


def _one_of(*allowed: str) -> Any:
    def check(value: Any) -> str | None:
        return None if value in allowed else f"must be one of {', '.join(allowed)}"

    return check


def _litellm_model(value: Any) -> str | None:
    return None if "/" in value else "must be litellm's provider/model, e.g. openai/gpt-4o-mini"


SECONDS = "a number of seconds"
SERVER = {
    "host": Spec(str, "a string", "127.0.0.1"),
    "port": Spec(int, "an integer", 8080, _port),
    "max_body_bytes": Spec(int, "an integer", 4 * 1024 * 1024, _positive),
    "probe_interval_s": Spec(NUMBER, SECONDS, 1.0, _positive),
    "log_level": Spec(str, "a string", "info", _level),
    "log_prompts": Spec(bool, "true or false", False),
    "spend_path": Spec(str, "a file path", None),
    "unlisted_params": Spec(str, '"drop" or "refuse"', "drop", _one_of("drop", "refuse")),
    "header_timeout_s": Spec(NUMBER, SECONDS, 10.0, _positive),
    "body_timeout_s": Spec(NUMBER, SECONDS, 30.0, _positive),
    "max_connections": Spec(int, "an integer", 4096, _positive),
    "max_head_bytes": Spec(int, "an integer", 64 * 1024, _positive),
    "max_headers": Spec(int, "an integer", 256, _positive),
}
TIMEOUTS = {
    name: Spec(NUMBER, SECONDS, default, _positive)
    for name, default in (
        ("connect_s", 2.0),
        ("first_byte_s", 60.0),
        ("idle_s", 60.0),
        ("total_s", 600.0),
    )
}
BACKEND = {
    "name": Spec(str, "a string", check=_name),
    "kind": Spec(str, "a string", check=_kind),
    "url": Spec(str, "a string", check=_url),
    "models": Spec((list, dict), "a list of names or a table of public name = engine name", None),
    "max_concurrency": Spec(int, "an integer", None, _positive),
    "api_key_env": Spec(str, "an environment variable name", None),
}
CLOUD = {
    "name": Spec(str, "a string", check=_name),
    "model": Spec(str, "a litellm model string", check=_litellm_model),
    "api_base": Spec(str, "a string", None, _url),
    "api_key_env": Spec(str, "an environment variable name", None),
    "wire": Spec(
        str, '"auto", "litellm" or "openai"', "auto", _one_of("auto", "litellm", "openai")
    ),
}
ROUTE = {
    "model": Spec(str, "the public model name"),
    "local": Spec(list, "a list of backend names", []),
    "cloud": Spec(list, "a list of cloud target names", []),
    "deadline_s": Spec(NUMBER, SECONDS, None, _positive),
    "overflow": Spec(dict, "a table", {}),
    "cache": Spec(dict, "a table", None),
    "degrade": Spec(dict, "a table", {}),
}
DEGRADE = {
    "model": Spec(str, "a public model name", None),
    "max_tokens": Spec(int, "an integer", None, _positive),
}
OVERFLOW = {
    "max_waiting": Spec(int, "an integer", None, _non_negative),
    "max_inflight_ratio": Spec(NUMBER, "a number", None, _positive),
    "max_kv_cache_usage": Spec(NUMBER, "a number", None, _share),
    "ttft_slo_s": Spec(NUMBER, SECONDS, None, _positive),
    "hysteresis": Spec(
        NUMBER, "a number", 0.1, lambda v: None if 0 <= v < 1 else "must be in [0, 1)"
    ),
}
PRIVACY = {
    "default": Spec(str, "a privacy level name", "public"),
    "levels": Spec(list, "an array of {name, cloud} tables", None),
    "detectors": Spec(dict, "a table of detector = level", {}),
    "media": Spec(str, "a privacy level name", None),
    "send_user": Spec(bool, "true or false", False),
    "scan_timeout_s": Spec(NUMBER, SECONDS, 5.0, _positive),
}
LEVEL = {
    "name": Spec(str, "a string", check=_name),
    "cloud": Spec((str, list), '"any", "none" or a list of cloud target names', "any"),
    "cache": Spec(str, '"any", "tenant" or "none"', "any", _one_of("any", "tenant", "none")),
    "redact": Spec(bool, "true or false", False),
}
TENANT = {
    "name": Spec(str, "a string", check=_name),
    "privacy": Spec(str, "a level name", None),
    "api_keys": Spec(list, f"a list of {FORMS}", [], secret=True),
    "requests_per_minute": Spec(int, "an integer", None, _positive),
    "tokens_per_minute": Spec(int, "an integer", None, _positive),
    "max_concurrent": Spec(int, "an integer", None, _positive),
    "burst_s": Spec(NUMBER, SECONDS, 10.0, _positive),
    "models": Spec(list, "a list of public model names", None),
    "cloud_budget_usd": Spec(NUMBER, "a number of US dollars", None, _non_negative),
    "budget_period": Spec(str, "hour, day, week or month", "day", _one_of(*PERIODS)),
    "priority": Spec(str, "a priority class name", None),
}
PRIORITIES = {
    "default": Spec(str, "a priority class name", None),
    "aging_s": Spec(NUMBER, SECONDS, 30.0, _positive),
    "classes": Spec(list, "an array of {name, ...} tables", None),
}
PRIORITY = {
    "name": Spec(str, "a string", check=_name),
    "local_share": Spec(
        NUMBER, "a number", 1.0, lambda v: None if 0 < v <= 1 else "must be in (0, 1]"
    ),
    "overflow": Spec(bool, "true or false", True),
    "max_wait_s": Spec(NUMBER, SECONDS, 30.0, _non_negative),
}
AUTH = {
    "require_keys": Spec(bool, "true or false", False),
    "admin_keys": Spec(list, f"a list of {FORMS}", [], secret=True),
}
BREAKER = {
    "consecutive_failures": Spec(int, "an integer", 5, _positive),
    "failure_rate": Spec(NUMBER, "a number", 0.5, _share),
    "min_calls": Spec(int, "an integer", 10, _positive),
    "window_s": Spec(NUMBER, SECONDS, 30.0, _positive),
    "open_s": Spec(NUMBER, SECONDS, 5.0, _positive),
    "half_open_probes": Spec(int, "an integer", 2, _positive),
}
RETRY = {
    "attempts": Spec(int, "an integer", 3, _positive),
    "initial_backoff_s": Spec(NUMBER, SECONDS, 0.1, _non_negative),
    "max_backoff_s": Spec(NUMBER, SECONDS, 2.0, _non_negative),
    "multiplier": Spec(NUMBER, "a number", 2.0, lambda v: None if v >= 1 else "must be at least 1"),
    "jitter": Spec(bool, "true or false", True),
}
_RULE = CacheRule()
CACHE_RULE = {
    "exact": Spec(bool, "true or false", _RULE.exact),
    "semantic": Spec(bool, "true or false", _RULE.semantic),
    "threshold": Spec(NUMBER, "a number", _RULE.threshold, _share),
    "ttl_s": Spec(NUMBER, SECONDS, _RULE.ttl_s, _positive),
    "max_entries": Spec(int, "an integer", _RULE.max_entries, _positive),
    "unset_temperature": Spec(bool, "true or false", _RULE.unset_temperature),
    "tools": Spec(bool, "true or false", _RULE.tools),
    "coalesce": Spec(bool, "true or false", _RULE.coalesce),
    "coalesce_nondeterministic": Spec(bool, "true or false", _RULE.coalesce_nondeterministic),
    "speculate": Spec(bool, "true or false", _RULE.speculate),
    "semantic_unkeyed": Spec(bool, "true or false", _RULE.semantic_unkeyed),
}
CACHE = {
    "enabled": Spec(bool, "true or false", True),
    "path": Spec(str, "a file path", None),
    "save_interval_s": Spec(NUMBER, SECONDS, 30.0, _positive),
    "embedder": Spec(str, '"onnx" or "torch"', "onnx", _one_of("onnx", "torch")),
    "verifier": Spec(bool, "true or false", True),
    "max_total_entries": Spec(int, "an integer", 100_000, _positive),
    "max_bytes": Spec(int, "an integer", 256 * 1024 * 1024, _positive),
    **CACHE_RULE,
}
BALANCING = {
    "strategy": Spec(str, "a strategy name", "prefix", _one_of(*STRATEGIES)),
    "min_prefix_tokens": Spec(int, "an integer", 256, _positive),
    "balance_abs": Spec(int, "an integer", 4, _non_negative),
    "balance_rel": Spec(NUMBER, "a number", 1.5, lambda v: None if v >= 1 else "must be >= 1"),
    "block_tokens": Spec(int, "an integer", 32, _positive),
    "index_blocks": Spec(int, "an integer", 200_000, _positive),
    "warm_wait_s": Spec(NUMBER, SECONDS, 0.0, _non_negative),
}
TOP_LEVEL = (
    "server",
    "timeouts",
    "backends",
    "clouds",
    "routes",
    "privacy",
    "tenants",
    "auth",
    "priorities",
    "breaker",
    "retry",
    "cache",
    "balancing",
)
DEFAULT_LEVELS: tuple[PrivacyLevel, ...] = (PrivacyLevel("public"),)
LIMIT_KEYS = tuple(f.name for f in fields(Limits))
