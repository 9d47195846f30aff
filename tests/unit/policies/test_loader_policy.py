"""policies/loader.py: clouds, routes, privacy, tenants, breaker and retry sections."""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from typing import Any

import pytest

from policies.loader import parse_policy
from policies.model import (
    DEFAULT_SEMANTIC_THRESHOLD,
    UNVERIFIED_SEMANTIC_THRESHOLD,
    Backend,
    Balancing,
    BreakerSettings,
    CacheRule,
    CacheSettings,
    CloudTarget,
    Overflow,
    Policy,
    Privacy,
    PrivacyLevel,
    RetrySettings,
    Route,
    Tenant,
)
from tests.policy_texts import BACKEND, problems_of

FULL = """\
[[backends]]
name = "gpu-1"
kind = "vllm"
url = "http://10.0.0.1:8000"

[[backends]]
name = "mac"
kind = "ollama"
url = "http://10.0.0.2:11434"

[[clouds]]
name = "openai-mini"
model = "openai/gpt-4o-mini"
api_key_env = "OPENAI_API_KEY"

[[clouds]]
name = "azure-eu"
model = "azure/gpt-4o"
api_base = "https://eu.example.azure.com"
api_key_env = "AZURE_KEY"

[[routes]]
model = "llama-3.1-8b"
local = ["gpu-1", "mac"]
cloud = ["azure-eu", "openai-mini"]
deadline_s = 30

[routes.overflow]
max_waiting = 8
max_inflight_ratio = 1.5
max_kv_cache_usage = 0.9
ttft_slo_s = 2
hysteresis = 0.2

[[routes]]
model = "qwen"

[privacy]
default = "internal"
levels = [
  { name = "public", cloud = "any" },
  { name = "internal", cloud = ["azure-eu"] },
  { name = "secret", cloud = "none" },
]

[privacy.detectors]
email = "internal"
payment_card = "secret"

[[tenants]]
name = "acme"
privacy = "secret"

[[tenants]]
name = "guest"

[breaker]
consecutive_failures = 3
failure_rate = 0.25
min_calls = 20
window_s = 60
open_s = 10
half_open_probes = 1

[retry]
attempts = 2
initial_backoff_s = 0
max_backoff_s = 5
multiplier = 3
jitter = false
"""

CLOUD = '\n[[clouds]]\nname = "c"\nmodel = "openai/gpt-4o-mini"\n'  # 4 lines, name on the 3rd
ROUTE = '\n[[routes]]\nmodel = "m"\n'  # 3 lines
LEVEL = '\n[[privacy.levels]]\nname = "public"\n'  # 3 lines
TENANT = '\n[[tenants]]\nname = "t"\n'  # 3 lines


def invalid(
    name: str, text: str, key: str, line: int | None, fragment: str, *marks: pytest.MarkDecorator
) -> Any:
    return pytest.param(text, key, line, fragment, marks=marks, id=name)


# (text, key path, line, message fragment); every text has exactly one problem.
INVALID = [
    invalid(
        "a cloud's wire that is neither litellm nor openai",
        BACKEND + CLOUD + 'wire = "grpc"\n',
        "clouds[0].wire",
        9,
        "must be one of auto, litellm, openai, got 'grpc'",
    ),
    invalid(
        "wire openai on another provider's model (its key would go to an OpenAI address)",
        BACKEND
        + CLOUD.replace("openai/gpt-4o-mini", "anthropic/claude-haiku-4-5")
        + 'wire = "openai"\n',
        "clouds[0].wire",
        9,
        "anthropic/ models go through litellm",
    ),
    invalid(
        "unknown backend in a route's local",
        BACKEND + '\n[[routes]]\nmodel = "m"\nlocal = ["a", "zz"]\n',
        "routes[0].local",
        8,
        "unknown backend 'zz' (defined: a)",
    ),
    invalid(
        "unknown cloud in a route's cloud",
        BACKEND + CLOUD + '\n[[routes]]\nmodel = "m"\ncloud = ["c", "nope"]\n',
        "routes[0].cloud",
        12,
        "unknown cloud target 'nope' (defined: c)",
    ),
    invalid(
        "route cloud with no clouds defined",
        BACKEND + ROUTE + 'cloud = ["x"]\n',
        "routes[0].cloud",
        8,
        "unknown cloud target 'x' (defined: none)",
    ),
    invalid(
        "unknown cloud in a level's cloud list",
        BACKEND
        + CLOUD
        + "\n[privacy]\n"
        + LEVEL
        + '\n[[privacy.levels]]\nname = "eu"\ncloud = ["c", "x"]\n',
        "privacy.levels[1].cloud",
        17,
        "unknown cloud target 'x' (defined: c)",
    ),
    invalid(
        "unknown cloud in an inline levels array",
        BACKEND
        + CLOUD
        + '\n[privacy]\nlevels = [{ name = "public" }, { name = "eu", cloud = ["c", "x"] }]\n',
        "privacy.levels[1].cloud",
        11,
        "unknown cloud target 'x'",
    ),
    invalid(
        "level cloud some",
        BACKEND + LEVEL + 'cloud = "some"\n',
        "privacy.levels[0].cloud",
        8,
        'expected "any", "none" or a list of names, got \'some\'',
    ),
    invalid(
        "level cloud list with a non-name",
        BACKEND + CLOUD + LEVEL + 'cloud = ["c", 3]\n',
        "privacy.levels[0].cloud",
        12,
        "expected a list of names",
    ),
    invalid(
        "unknown level in default",
        BACKEND + '\n[privacy]\ndefault = "secret"\n',
        "privacy.default",
        7,
        "unknown level 'secret' (levels: public)",
    ),
    invalid(
        "default left out and no public level",
        BACKEND + "\n[privacy]\n" + '\n[[privacy.levels]]\nname = "internal"\n',
        "privacy.default",
        6,
        "unknown level 'public'",
    ),
    invalid(
        "unknown level in a tenant",
        BACKEND + TENANT + 'privacy = "vip"\n',
        "tenants[0].privacy",
        8,
        "unknown level 'vip'",
    ),
    invalid(
        "unknown level in a detector",
        BACKEND + '\n[privacy.detectors]\nemail = "vip"\n',
        "privacy.detectors.email",
        7,
        "unknown level 'vip' (levels: public)",
    ),
    invalid(
        "unknown detector",
        BACKEND + '\n[privacy.detectors]\nblood_type = "public"\n',
        "privacy.detectors.blood_type",
        7,
        "unknown detector (expected one of email, phone, payment_card, us_ssn, iban, ip_address, "
        "secret, national_id, passport, date_of_birth, street_address, record_number, device_id, "
        "person, medical)",
    ),
    invalid(
        "duplicate cloud names",
        BACKEND + CLOUD + CLOUD,
        "clouds[1].name",
        11,
        "duplicate cloud target name 'c'",
    ),
    invalid(
        "duplicate route models",
        BACKEND + ROUTE + ROUTE,
        "routes[1].model",
        10,
        "duplicate route model name 'm'",
    ),
    invalid(
        "duplicate level names",
        BACKEND + LEVEL + LEVEL,
        "privacy.levels[1].name",
        10,
        "duplicate level name 'public'",
    ),
    invalid(
        "duplicate tenant names",
        BACKEND + TENANT + TENANT,
        "tenants[1].name",
        10,
        "duplicate tenant name 't'",
    ),
    invalid(
        "litellm model without a provider",
        BACKEND + '\n[[clouds]]\nname = "c"\nmodel = "gpt-4o-mini"\n',
        "clouds[0].model",
        8,
        "must be litellm's provider/model",
    ),
    invalid(
        "cloud api_base not a URL",
        BACKEND + CLOUD + 'api_base = "ftp://x"\n',
        "clouds[0].api_base",
        9,
        "must be an http:// or https:// URL",
    ),
    invalid(
        "clouds as a single table",
        BACKEND + '\n[clouds]\nname = "c"\n',
        "clouds",
        6,
        "must be an array of tables ([[clouds]])",
    ),
    invalid(
        "hysteresis of 1",
        BACKEND + ROUTE + "\n[routes.overflow]\nhysteresis = 1.0\n",
        "routes[0].overflow.hysteresis",
        10,
        "must be in [0, 1), got 1.0",
    ),
    invalid(
        "negative hysteresis",
        BACKEND + ROUTE + "\n[routes.overflow]\nhysteresis = -0.1\n",
        "routes[0].overflow.hysteresis",
        10,
        "must be in [0, 1), got -0.1",
    ),
    invalid(
        "hysteresis in the second route's overflow",
        BACKEND
        + ROUTE
        + "\n[routes.overflow]\nmax_waiting = 4\n"  # lines 5-10
        + '\n[[routes]]\nmodel = "n"\n\n[routes.overflow]\nhysteresis = 2\n',  # lines 11-16
        "routes[1].overflow.hysteresis",
        16,
        "must be in [0, 1)",
    ),
    invalid(
        "max_kv_cache_usage above 1",
        BACKEND + ROUTE + "\n[routes.overflow]\nmax_kv_cache_usage = 1.5\n",
        "routes[0].overflow.max_kv_cache_usage",
        10,
        "must be in (0, 1], got 1.5",
    ),
    invalid(
        "negative max_waiting",
        BACKEND + ROUTE + "\n[routes.overflow]\nmax_waiting = -1\n",
        "routes[0].overflow.max_waiting",
        10,
        "must not be negative, got -1",
    ),
    invalid(
        "unknown key in overflow",
        BACKEND + ROUTE + "\n[routes.overflow]\nmax_wait = 3\n",
        "routes[0].overflow.max_wait",
        10,
        "unknown key (expected one of max_waiting,",
    ),
    invalid(
        "unknown key in a route",
        BACKEND + ROUTE + 'locals = ["a"]\n',
        "routes[0].locals",
        8,
        "unknown key (expected one of model, local, cloud,",
    ),
    invalid(
        "route local as a string",
        BACKEND + ROUTE + 'local = "a"\n',
        "routes[0].local",
        8,
        "expected a list of backend names, got 'a'",
    ),
    invalid(
        "route without a model",
        BACKEND + '\n[[routes]]\nlocal = ["a"]\n',
        "routes[0].model",
        6,
        "is required (the public model name)",
    ),
    invalid(
        "zero route deadline",
        BACKEND + ROUTE + "deadline_s = 0\n",
        "routes[0].deadline_s",
        8,
        "must be greater than 0, got 0",
    ),
    invalid(
        "unknown key in privacy",
        BACKEND + '\n[privacy]\nlevel = "public"\n',
        "privacy.level",
        7,
        "unknown key (expected one of default, levels, detectors, media, send_user, "
        "scan_timeout_s)",
    ),
    invalid(
        "jitter as a string",
        BACKEND + '\n[retry]\njitter = "yes"\n',
        "retry.jitter",
        7,
        "expected true or false, got 'yes'",
    ),
    invalid(
        "jitter as an integer",
        BACKEND + "\n[retry]\njitter = 1\n",
        "retry.jitter",
        7,
        "expected true or false, got 1",
    ),
    invalid(
        "zero attempts",
        BACKEND + "\n[retry]\nattempts = 0\n",
        "retry.attempts",
        7,
        "must be greater than 0, got 0",
    ),
    invalid(
        "backoff multiplier below 1",
        BACKEND + "\n[retry]\nmultiplier = 0.5\n",
        "retry.multiplier",
        7,
        "must be at least 1, got 0.5",
    ),
    invalid(
        "zero failure rate",
        BACKEND + "\n[breaker]\nfailure_rate = 0\n",
        "breaker.failure_rate",
        7,
        "must be in (0, 1], got 0",
    ),
    invalid(
        "zero half-open probes",
        BACKEND + "\n[breaker]\nhalf_open_probes = 0\n",
        "breaker.half_open_probes",
        7,
        "must be greater than 0, got 0",
    ),
    invalid(
        "cache threshold above 1",
        BACKEND + "\n[cache]\nthreshold = 2\n",
        "cache.threshold",
        7,
        "must be in (0, 1], got 2",
    ),
    invalid(
        "cache threshold of 0",
        BACKEND + "\n[cache]\nthreshold = 0\n",
        "cache.threshold",
        7,
        "must be in (0, 1], got 0",
    ),
    invalid(
        "unknown cache embedder",
        BACKEND + '\n[cache]\nembedder = "gpu"\n',
        "cache.embedder",
        7,
        "must be one of onnx, torch, got 'gpu'",
    ),
    invalid(
        "unknown key in cache",
        BACKEND + "\n[cache]\nsemantic = true\nttl = 60\n",
        "cache.ttl",
        8,
        "unknown key (expected one of enabled, path, save_interval_s, embedder,",
    ),
    invalid(
        "zero cache ttl",
        BACKEND + "\n[cache]\nttl_s = 0\n",
        "cache.ttl_s",
        7,
        "must be greater than 0, got 0",
    ),
    invalid(
        "fractional max_entries",
        BACKEND + "\n[cache]\nmax_entries = 1.5\n",
        "cache.max_entries",
        7,
        "expected an integer, got 1.5",
    ),
    invalid(
        "cache semantic as a string",
        BACKEND + '\n[cache]\nsemantic = "yes"\n',
        "cache.semantic",
        7,
        "expected true or false, got 'yes'",
    ),
    invalid(
        "cache as a plain value",
        "cache = 3\n" + BACKEND,
        "cache",
        1,
        "must be a table",
    ),
    invalid(
        "unknown key in a route's cache",
        BACKEND + ROUTE + "\n[routes.cache]\nthreshhold = 0.8\n",
        "routes[0].cache.threshhold",
        10,
        "unknown key (expected one of exact, semantic,",
    ),
    invalid(
        "route cache threshold above 1",
        BACKEND + ROUTE + "\n[routes.cache]\nthreshold = 2\n",
        "routes[0].cache.threshold",
        10,
        "must be in (0, 1], got 2",
    ),
    invalid(
        "cache threshold in the second route",
        BACKEND
        + ROUTE
        + "\n[routes.cache]\nttl_s = 5\n"  # lines 5-10
        + '\n[[routes]]\nmodel = "n"\n\n[routes.cache]\nthreshold = 1.5\n',  # lines 11-16
        "routes[1].cache.threshold",
        16,
        "must be in (0, 1], got 1.5",
    ),
    invalid(
        "route cache not a table",
        BACKEND + ROUTE + "cache = true\n",
        "routes[0].cache",
        8,
        "expected a table, got True",
    ),
    invalid(
        "the embedder is not a route key",
        BACKEND + ROUTE + '\n[routes.cache]\nembedder = "torch"\n',
        "routes[0].cache.embedder",
        10,
        "unknown key",
    ),
    invalid(
        "unknown level cache value",
        BACKEND + LEVEL + 'cache = "never"\n',
        "privacy.levels[0].cache",
        8,
        "must be one of any, tenant, none, got 'never'",
    ),
]


def test_valid_full_file_parses_into_the_expected_policy() -> None:
    policy = parse_policy(FULL, "full.toml")
    assert policy == Policy(
        backends=(
            Backend("gpu-1", "vllm", "http://10.0.0.1:8000"),
            Backend("mac", "ollama", "http://10.0.0.2:11434"),
        ),
        clouds=(
            CloudTarget("openai-mini", "openai/gpt-4o-mini", api_key_env="OPENAI_API_KEY"),
            CloudTarget("azure-eu", "azure/gpt-4o", "https://eu.example.azure.com", "AZURE_KEY"),
        ),
        routes=(
            Route(
                "llama-3.1-8b",
                local=("gpu-1", "mac"),
                cloud=("azure-eu", "openai-mini"),
                overflow=Overflow(8, 1.5, 0.9, 2.0, 0.2),
                deadline_s=30.0,
            ),
            Route("qwen"),
        ),
        privacy=Privacy(
            levels=(
                PrivacyLevel("public", "any"),
                PrivacyLevel("internal", ("azure-eu",)),
                PrivacyLevel("secret", "none"),
            ),
            default="internal",
            detectors={"email": "internal", "payment_card": "secret"},
        ),
        tenants=(Tenant("acme", "secret"), Tenant("guest")),
        breaker=BreakerSettings(3, 0.25, 20, 60.0, 10.0, 1),
        retry=RetrySettings(2, 0.0, 5.0, 3.0, False),
        source="full.toml",
    )


def test_route_backends_and_clouds_are_tuples_in_the_written_order() -> None:
    route = parse_policy(FULL).routes[0]
    assert route.local == ("gpu-1", "mac")
    assert route.cloud == ("azure-eu", "openai-mini")
    assert isinstance(route.local, tuple)
    assert isinstance(route.cloud, tuple)


def test_a_route_without_overflow_gets_the_default_thresholds() -> None:
    route = parse_policy(FULL).route("qwen")
    assert route is not None
    assert route.overflow == Overflow(None, None, None, None, 0.1)
    assert (route.local, route.cloud, route.deadline_s) == ((), (), None)


def test_integer_thresholds_and_seconds_become_floats() -> None:
    policy = parse_policy(FULL)
    overflow = policy.routes[0].overflow
    assert type(overflow.ttft_slo_s) is float
    assert type(overflow.max_waiting) is int
    assert type(policy.retry.initial_backoff_s) is float
    assert type(policy.breaker.window_s) is float


def test_level_clouds_parse_into_any_none_or_a_tuple() -> None:
    levels = parse_policy(FULL).privacy.levels
    assert [level.cloud for level in levels] == ["any", ("azure-eu",), "none"]


def test_privacy_levels_allow_their_clouds() -> None:
    privacy = parse_policy(FULL).privacy
    public, internal, secret = (privacy.level(n) for n in ("public", "internal", "secret"))
    assert public.allows("openai-mini")
    assert public.allows("azure-eu")
    assert internal.allows("azure-eu")
    assert not internal.allows("openai-mini")
    assert not secret.allows("azure-eu")


def test_strictness_follows_the_written_order_of_levels() -> None:
    privacy = parse_policy(FULL).privacy
    assert [privacy.strictness(n) for n in ("public", "internal", "secret")] == [0, 1, 2]


def test_lookups_by_name() -> None:
    policy = parse_policy(FULL)
    assert policy.cloud("azure-eu").api_base == "https://eu.example.azure.com"
    assert policy.tenant("acme") == Tenant("acme", "secret")
    assert policy.tenant("nobody") is None
    assert policy.route("missing") is None


def test_parsed_sections_are_frozen() -> None:
    policy = parse_policy(FULL)
    with pytest.raises(FrozenInstanceError):
        policy.routes[0].overflow.max_waiting = 1  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        policy.privacy.default = "public"  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        policy.retry.attempts = 9  # type: ignore[misc]
    assert isinstance(policy.clouds, tuple)
    assert isinstance(policy.tenants, tuple)


def test_without_new_sections_the_defaults_apply() -> None:
    policy = parse_policy(BACKEND)
    assert (policy.clouds, policy.routes, policy.tenants) == ((), (), ())
    assert policy.privacy == Privacy((PrivacyLevel("public", "any"),), "public", {})
    assert policy.breaker == BreakerSettings()
    assert policy.retry == RetrySettings(3, 0.1, 2.0, 2.0, True)


def test_levels_written_as_an_array_of_tables_parse_the_same() -> None:
    text = (
        BACKEND
        + CLOUD
        + '\n[privacy]\ndefault = "eu"\n'
        + '\n[[privacy.levels]]\nname = "public"\n'
        + '\n[[privacy.levels]]\nname = "eu"\ncloud = ["c"]\n'
    )
    privacy = parse_policy(text).privacy
    assert privacy.levels == (PrivacyLevel("public", "any"), PrivacyLevel("eu", ("c",)))
    assert privacy.default == "eu"


@pytest.mark.parametrize(("text", "key", "line", "fragment"), INVALID)
def test_invalid_file_reports_key_line_and_message(
    text: str, key: str, line: int | None, fragment: str
) -> None:
    [problem] = problems_of(text)
    assert (problem.key, problem.line) == (key, line)
    assert fragment in problem.message


def test_the_invalid_table_is_large() -> None:
    assert len(INVALID) >= 20


def test_cross_section_problems_are_all_reported_at_once() -> None:
    text = (
        BACKEND  # 1-4
        + '\n[[routes]]\nmodel = "m"\nlocal = ["x"]\ncloud = ["y"]\n'  # 5-9
        + '\n[privacy]\ndefault = "vip"\n'  # 10-12
        + '\n[privacy.detectors]\nphone = "vip"\n'  # 13-15
        + '\n[[tenants]]\nname = "t"\nprivacy = "vip"\n'  # 16-19
    )
    found = sorted((p.key, p.line) for p in problems_of(text))
    assert found == [
        ("privacy.default", 12),
        ("privacy.detectors.phone", 15),
        ("routes[0].cloud", 9),
        ("routes[0].local", 8),
        ("tenants[0].privacy", 19),
    ]


def test_two_levels_without_names_are_not_called_duplicates() -> None:
    text = BACKEND + '\n[privacy]\ndefault = "public"\n' + "\n[[privacy.levels]]\n" * 2
    messages = [p.message for p in problems_of(text)]
    assert not [m for m in messages if "duplicate" in m]


# --- the semantic cache: [cache], [routes.cache] and a privacy level's `cache` -------------------

CACHE = """\
[[backends]]
name = "a"
kind = "vllm"
url = "http://h:1"

[cache]
enabled = false
path = "/var/lib/overspill/cache.jsonl"
save_interval_s = 10
embedder = "torch"
threshold = 0.95
ttl_s = 600
max_entries = 500
unset_temperature = true
coalesce = false

[[routes]]
model = "tuned"

[routes.cache]
threshold = 0.8
tools = true
max_entries = 20

[[routes]]
model = "inherits"

[[routes]]
model = "empty-table"

[routes.cache]
"""


def test_without_the_verifier_the_default_threshold_is_the_guards() -> None:
    """The threshold then decides a hit alone: the higher one measured for the guard, unless
    the admin sets one; routes inherit it."""
    unverified = parse_policy(BACKEND + ROUTE + "[cache]\nverifier = false\n")
    assert unverified.cache.verifier is False
    assert unverified.cache.rule.threshold == UNVERIFIED_SEMANTIC_THRESHOLD
    assert unverified.cache_rule("m").threshold == UNVERIFIED_SEMANTIC_THRESHOLD
    chosen = parse_policy(BACKEND + ROUTE + "[cache]\nverifier = false\nthreshold = 0.8\n")
    assert chosen.cache.rule.threshold == 0.8
    assert parse_policy(BACKEND + ROUTE).cache.rule.threshold == DEFAULT_SEMANTIC_THRESHOLD


def test_cache_defaults_without_a_cache_section() -> None:
    policy = parse_policy(BACKEND + ROUTE)
    assert policy.cache == CacheSettings()
    assert policy.cache == CacheSettings(True, None, 30.0, "onnx", CacheRule())
    assert policy.cache.verifier is True
    assert policy.cache.rule == CacheRule(
        exact=True,
        semantic=True,
        threshold=0.7,
        ttl_s=3600.0,
        max_entries=10_000,
        unset_temperature=False,
        tools=False,
        coalesce=True,
        coalesce_nondeterministic=False,
    )
    assert policy.routes[0].cache is None
    assert policy.cache_rule("m") == CacheRule()
    assert policy.cache_rule("no-such-route") == CacheRule()


def test_cache_section_parses_every_key() -> None:
    cache = parse_policy(CACHE).cache
    assert cache == CacheSettings(
        enabled=False,
        path="/var/lib/overspill/cache.jsonl",
        save_interval_s=10.0,
        embedder="torch",
        rule=CacheRule(
            threshold=0.95, ttl_s=600.0, max_entries=500, unset_temperature=True, coalesce=False
        ),
    )
    assert type(cache.save_interval_s) is float
    assert type(cache.rule.ttl_s) is float
    assert type(cache.rule.max_entries) is int


def test_a_route_cache_overrides_only_the_keys_it_sets() -> None:
    policy = parse_policy(CACHE)
    tuned = policy.route("tuned")
    assert tuned is not None
    assert tuned.cache == CacheRule(
        threshold=0.8,
        tools=True,
        max_entries=20,  # the route's own
        ttl_s=600.0,
        unset_temperature=True,
        coalesce=False,  # from [cache]
    )
    assert policy.cache_rule("tuned") == tuned.cache


def test_a_route_without_its_own_cache_uses_the_cache_section() -> None:
    policy = parse_policy(CACHE)
    route = policy.route("inherits")
    assert route is not None
    assert route.cache is None
    assert policy.cache_rule("inherits") == policy.cache.rule


def test_an_empty_route_cache_table_is_the_cache_section() -> None:
    policy = parse_policy(CACHE)
    assert policy.cache_rule("empty-table") == policy.cache.rule


def test_a_route_cache_before_the_cache_section_still_inherits_it() -> None:
    text = BACKEND + ROUTE + "\n[routes.cache]\ntools = true\n" + "\n[cache]\nttl_s = 60\n"
    assert parse_policy(text).cache_rule("m") == CacheRule(ttl_s=60.0, tools=True)


def test_a_route_cache_may_turn_caching_off() -> None:
    text = BACKEND + ROUTE + "\n[routes.cache]\nexact = false\nsemantic = false\n"
    rule = parse_policy(text).cache_rule("m")
    assert (rule.exact, rule.semantic) == (False, False)


def test_cache_rules_are_frozen() -> None:
    policy = parse_policy(CACHE)
    with pytest.raises(FrozenInstanceError):
        policy.cache.rule.threshold = 0.1  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        policy.cache.enabled = True  # type: ignore[misc]


def test_privacy_level_cache_values() -> None:
    text = (
        BACKEND
        + '\n[privacy]\ndefault = "public"\nlevels = [\n'
        + '  { name = "public" },\n'
        + '  { name = "internal", cache = "tenant" },\n'
        + '  { name = "secret", cloud = "none", cache = "none" },\n'
        + '  { name = "open", cache = "any" },\n]\n'
    )
    levels = parse_policy(text).privacy.levels
    assert levels == (
        PrivacyLevel("public", "any", "any"),
        PrivacyLevel("internal", "any", "tenant"),
        PrivacyLevel("secret", "none", "none"),
        PrivacyLevel("open", "any", "any"),
    )


def test_privacy_level_cache_tenant_in_an_array_of_tables() -> None:
    text = BACKEND + "\n[privacy]\n" + LEVEL + 'cache = "tenant"\n'
    assert parse_policy(text).privacy.level("public").cache == "tenant"


def test_the_default_privacy_level_caches() -> None:
    assert parse_policy(BACKEND).privacy.level("public").cache == "any"


def test_cache_problems_are_all_reported_at_once() -> None:
    text = (
        BACKEND  # 1-4
        + '\n[cache]\nthreshold = 2\nembedder = "gpu"\nspeed = 1\n'  # 5-9
        + ROUTE  # 10-12
        + "\n[routes.cache]\nttl_s = -1\n"  # 13-15
        + LEVEL  # 16-18
        + 'cache = "sometimes"\n'  # 19
    )
    found = sorted((p.key, p.line) for p in problems_of(text))
    assert found == [
        ("cache.embedder", 8),
        ("cache.speed", 9),
        ("cache.threshold", 7),
        ("privacy.levels[0].cache", 19),
        ("routes[0].cache.ttl_s", 15),
    ]


# --- [balancing]: how a request picks among the replicas of its model -----------------------------

BALANCING = """\
[[backends]]
name = "a"
kind = "vllm"
url = "http://h:1"

[balancing]
strategy = "least_loaded"
min_prefix_tokens = 512
balance_abs = 8
balance_rel = 2
block_tokens = 16
index_blocks = 1000
warm_wait_s = 0
"""


def test_balancing_defaults_without_a_balancing_section() -> None:
    balancing = parse_policy(BACKEND).balancing
    assert balancing == Balancing()
    assert balancing == Balancing(
        strategy="prefix",
        min_prefix_tokens=256,
        balance_abs=4,
        balance_rel=1.5,
        block_tokens=32,
        index_blocks=200_000,
        warm_wait_s=0.0,
    )
    assert balancing.block_chars == 128
    assert parse_policy(BACKEND + "\n[balancing]\n").balancing == Balancing()


def test_balancing_section_parses_every_key() -> None:
    balancing = parse_policy(BALANCING).balancing
    assert balancing == Balancing("least_loaded", 512, 8, 2.0, 16, 1000, 0.0)
    assert balancing.block_chars == 64
    assert type(balancing.balance_rel) is float
    assert type(balancing.warm_wait_s) is float
    assert type(balancing.block_tokens) is int


@pytest.mark.parametrize("strategy", ["prefix", "least_loaded", "round_robin"])
def test_every_strategy_parses(strategy: str) -> None:
    text = BACKEND + f'\n[balancing]\nstrategy = "{strategy}"\n'
    assert parse_policy(text).balancing.strategy == strategy


def test_a_balancing_key_left_out_keeps_its_default() -> None:
    text = BACKEND + "\n[balancing]\nwarm_wait_s = 0.5\n"
    assert parse_policy(text).balancing == Balancing(warm_wait_s=0.5)


def test_balancing_is_frozen() -> None:
    with pytest.raises(FrozenInstanceError):
        parse_policy(BALANCING).balancing.strategy = "prefix"  # type: ignore[misc]


# (text, key path, line, message fragment); every text has exactly one problem.
INVALID_BALANCING = [
    invalid(
        "unknown strategy",
        BACKEND + '\n[balancing]\nstrategy = "random"\n',
        "balancing.strategy",
        7,
        "must be one of prefix, least_loaded, round_robin, got 'random'",
    ),
    invalid(
        "balance_rel below 1",
        BACKEND + "\n[balancing]\nbalance_rel = 0.5\n",
        "balancing.balance_rel",
        7,
        "must be >= 1, got 0.5",
    ),
    invalid(
        "zero block_tokens",
        BACKEND + "\n[balancing]\nblock_tokens = 0\n",
        "balancing.block_tokens",
        7,
        "must be greater than 0, got 0",
    ),
    invalid(
        "unknown key in balancing",
        BACKEND + '\n[balancing]\nstrategy = "prefix"\nwarm_wait = 1\n',
        "balancing.warm_wait",
        8,
        "unknown key (expected one of strategy, min_prefix_tokens, balance_abs, balance_rel, "
        "block_tokens, index_blocks, warm_wait_s)",
    ),
    invalid(
        "zero min_prefix_tokens",
        BACKEND + "\n[balancing]\nmin_prefix_tokens = 0\n",
        "balancing.min_prefix_tokens",
        7,
        "must be greater than 0, got 0",
    ),
    invalid(
        "negative balance_abs",
        BACKEND + "\n[balancing]\nbalance_abs = -1\n",
        "balancing.balance_abs",
        7,
        "must not be negative, got -1",
    ),
    invalid(
        "zero index_blocks",
        BACKEND + "\n[balancing]\nindex_blocks = 0\n",
        "balancing.index_blocks",
        7,
        "must be greater than 0, got 0",
    ),
    invalid(
        "negative warm_wait_s",
        BACKEND + "\n[balancing]\nwarm_wait_s = -1\n",
        "balancing.warm_wait_s",
        7,
        "must not be negative, got -1",
    ),
    invalid(
        "fractional block_tokens",
        BACKEND + "\n[balancing]\nblock_tokens = 1.5\n",
        "balancing.block_tokens",
        7,
        "expected an integer, got 1.5",
    ),
    invalid(
        "strategy as a number",
        BACKEND + "\n[balancing]\nstrategy = 1\n",
        "balancing.strategy",
        7,
        "expected a strategy name, got 1",
    ),
    invalid(
        "balancing as a plain value",
        "balancing = 3\n" + BACKEND,
        "balancing",
        1,
        "must be a table",
    ),
]


@pytest.mark.parametrize(("text", "key", "line", "fragment"), INVALID_BALANCING)
def test_invalid_balancing_reports_key_line_and_message(
    text: str, key: str, line: int | None, fragment: str
) -> None:
    [problem] = problems_of(text)
    assert (problem.key, problem.line) == (key, line)
    assert fragment in problem.message


def test_balancing_problems_are_all_reported_at_once() -> None:
    text = (
        BACKEND  # 1-4
        + '\n[balancing]\nstrategy = "random"\nbalance_rel = 0.5\nblock_tokens = 0\n'  # 5-9
        + "speed = 1\n"  # 10
    )
    found = sorted((p.key, p.line) for p in problems_of(text))
    assert found == [
        ("balancing.balance_rel", 8),
        ("balancing.block_tokens", 9),
        ("balancing.speed", 10),
        ("balancing.strategy", 7),
    ]
