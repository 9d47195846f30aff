"""policies/loader.py: a tenant's API keys, limits and models, and the [auth] section."""

from __future__ import annotations

import pytest

from policies.apikeys import digest
from policies.loader import parse_policy
from policies.model import Auth, Limits, Tenant
from tests.policy_texts import BACKEND, error_of, problems_of

TENANT = '\n[[tenants]]\nname = "t"\n'  # 3 lines
SECRET = "sk-live-4f9a8b7c6d5e3f2a1b0c"
OTHER = "sk-live-0000aaaa1111bbbb"
ENVIRON = {"ACME_KEY": SECRET, "ADMIN_KEY": OTHER}
SHA = f"sha256:{digest(OTHER)}"


def test_a_tenant_with_every_key_parses_into_the_expected_tenant() -> None:
    text = f"""{BACKEND}
[privacy]
levels = [{{ name = "public" }}, {{ name = "secret", cloud = "none" }}]

[[tenants]]
name = "acme"
privacy = "secret"
api_keys = ["sha256:{digest(OTHER).upper()}", "env:ACME_KEY"]
requests_per_minute = 60
tokens_per_minute = 100000
max_concurrent = 4
models = ["llama", "qwen"]

[[tenants]]
name = "guest"
"""
    acme, guest = parse_policy(text, "f.toml", ENVIRON).tenants
    assert acme == Tenant(
        "acme", "secret", (digest(OTHER), digest(SECRET)), Limits(60, 100000, 4), ("llama", "qwen")
    )
    assert guest == Tenant("guest")
    assert guest.limits == Limits(None, None, None)
    assert guest.models is None


def test_an_empty_models_list_allows_no_model() -> None:
    [tenant] = parse_policy(BACKEND + TENANT + "models = []\n", "f.toml", {}).tenants
    assert tenant.models == ()


def test_env_keys_are_resolved_from_the_given_environ_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ACME_KEY", OTHER)
    [tenant] = parse_policy(
        BACKEND + TENANT + 'api_keys = ["env:ACME_KEY"]\n', "f.toml", {"ACME_KEY": SECRET}
    ).tenants
    assert tenant.api_keys == (digest(SECRET),)
    [problem] = problems_of(BACKEND + TENANT + 'api_keys = ["env:ACME_KEY"]\n', {})
    assert problem.message == "environment variable ACME_KEY is not set"


def test_the_auth_section_parses_require_keys_and_admin_keys() -> None:
    text = BACKEND + f'\n[auth]\nrequire_keys = true\nadmin_keys = ["env:ADMIN_KEY", "{SHA}"]\n'
    auth = parse_policy(text, "f.toml", ENVIRON).auth
    assert auth == Auth(require_keys=True, admin_keys=(digest(OTHER), digest(OTHER)))


def test_without_an_auth_section_keys_are_optional_and_admin_is_open() -> None:
    assert parse_policy(BACKEND, "f.toml", {}).auth == Auth(False, ())


def test_the_same_key_twice_in_one_tenant_is_not_a_conflict() -> None:
    text = BACKEND + TENANT + f'api_keys = ["env:ADMIN_KEY", "{SHA}"]\n'
    [tenant] = parse_policy(text, "f.toml", ENVIRON).tenants
    assert tenant.api_keys == (digest(OTHER), digest(OTHER))


# (text, key path, message fragment); every text has exactly one problem.
INVALID = {
    "bad sha256 entry": (
        TENANT + f'api_keys = ["{SHA}", "sha256:abc"]\n',
        "tenants[0].api_keys[1]",
        "a sha256 key must be 64 hex digits, got 3 characters",
    ),
    "unknown scheme": (
        TENANT + 'api_keys = ["env:ACME_KEY", "md5:abc"]\n',
        "tenants[0].api_keys[1]",
        'expected "sha256:<64 hex digits>" or "env:VARIABLE"',
    ),
    "non-string entry": (
        TENANT + f'api_keys = ["{SHA}", 12345]\n',
        "tenants[0].api_keys[1]",
        'expected "sha256:<64 hex digits>" or "env:VARIABLE", got int',
    ),
    "unset env var": (
        TENANT + 'api_keys = ["env:NOT_SET"]\n',
        "tenants[0].api_keys[0]",
        "environment variable NOT_SET is not set",
    ),
    "bad env var name": (
        TENANT + 'api_keys = ["env:1KEY"]\n',
        "tenants[0].api_keys[0]",
        "what follows env: is not an environment variable name",
    ),
    "api_keys not a list": (
        TENANT + "api_keys = 3\n",
        "tenants[0].api_keys",
        'expected a list of "sha256:<64 hex digits>" or "env:VARIABLE", got int (not shown)',
    ),
    "zero requests_per_minute": (
        TENANT + "requests_per_minute = 0\n",
        "tenants[0].requests_per_minute",
        "must be greater than 0, got 0",
    ),
    "negative tokens_per_minute": (
        TENANT + "tokens_per_minute = -5\n",
        "tenants[0].tokens_per_minute",
        "must be greater than 0, got -5",
    ),
    "zero max_concurrent": (
        TENANT + "max_concurrent = 0\n",
        "tenants[0].max_concurrent",
        "must be greater than 0, got 0",
    ),
    "float requests_per_minute": (
        TENANT + "requests_per_minute = 1.5\n",
        "tenants[0].requests_per_minute",
        "expected an integer, got 1.5",
    ),
    "models with a non-name": (
        TENANT + 'models = ["llama", 3]\n',
        "tenants[0].models",
        "expected a list of names",
    ),
    "unknown key in a tenant": (
        TENANT + "api_key = []\n",
        "tenants[0].api_key",
        "unknown key (expected one of name, privacy, api_keys, requests_per_minute, "
        "tokens_per_minute, max_concurrent, burst_s, models, cloud_budget_usd, budget_period, "
        "priority)",
    ),
    "the same key for two tenants": (
        f'{TENANT}api_keys = ["env:ACME_KEY"]\n\n[[tenants]]\nname = "u"\n'
        f'api_keys = ["{SHA}", "sha256:{digest(SECRET)}"]\n',
        "tenants[1].api_keys",
        "also a key of tenant 't'",
    ),
    "bad admin key": (
        '\n[auth]\nadmin_keys = ["sha256:xyz", "env:ADMIN_KEY"]\n',
        "auth.admin_keys[0]",
        "a sha256 key must be 64 hex digits, got 3 characters",
    ),
    "unset admin key variable": (
        '\n[auth]\nadmin_keys = ["env:ADMIN_KEY", "env:NOT_SET"]\n',
        "auth.admin_keys[1]",
        "environment variable NOT_SET is not set",
    ),
    "unknown key in auth": (
        "\n[auth]\nrequire_key = true\n",
        "auth.require_key",
        "unknown key (expected one of require_keys, admin_keys)",
    ),
    "require_keys not a bool": (
        '\n[auth]\nrequire_keys = "yes"\n',
        "auth.require_keys",
        "expected true or false, got 'yes'",
    ),
}


@pytest.mark.parametrize(("text", "key", "fragment"), INVALID.values(), ids=INVALID.keys())
def test_an_invalid_tenant_or_auth_reports_its_key_path(text: str, key: str, fragment: str) -> None:
    error = error_of(BACKEND + text, ENVIRON)
    [problem] = error.problems
    assert problem.key == key
    assert fragment in problem.message
    assert SECRET not in str(error)
    assert OTHER not in str(error)


def test_tenant_and_auth_problems_are_reported_on_their_lines() -> None:
    text = BACKEND + TENANT + "max_concurrent = 0\n" + "\n[auth]\nrequire_key = true\n"  # 5-11
    found = [(p.key, p.line) for p in problems_of(text, ENVIRON)]
    assert found == [("tenants[0].max_concurrent", 8), ("auth.require_key", 11)]


def test_every_bad_key_declaration_is_reported_at_once() -> None:
    keys = 'api_keys = ["sha256:1", 2, "env:NOPE"]\n\n[auth]\nadmin_keys = ["md5:x"]\n'
    text = BACKEND + TENANT + keys
    found = [p.key for p in problems_of(text, ENVIRON)]
    assert found == [
        "tenants[0].api_keys[0]",
        "tenants[0].api_keys[1]",
        "tenants[0].api_keys[2]",
        "auth.admin_keys[0]",
    ]


def test_a_policy_error_never_shows_a_key_read_from_the_environment() -> None:
    text = (
        BACKEND
        + TENANT
        + 'api_keys = ["env:ACME_KEY", "sha256:0"]\n'
        + '\n[[tenants]]\nname = "u"\napi_keys = ["env:ACME_KEY", "env:NOPE"]\n'
        + '\n[auth]\nadmin_keys = ["env:ACME_KEY", "env:ADMIN_KEY", "env:ADMIN_KEY "]\n'
    )
    error = error_of(text, ENVIRON)
    assert len(error.problems) == 4
    for secret in (SECRET, OTHER, digest(SECRET), digest(OTHER)):
        assert secret not in str(error)


def test_a_bad_key_declaration_is_reported_on_its_line() -> None:
    text = BACKEND + TENANT + f'api_keys = ["{SHA}", "sha256:abc"]\n'
    [problem] = problems_of(text, ENVIRON)
    assert (problem.key, problem.line) == ("tenants[0].api_keys[1]", 8)


def test_a_clear_key_written_instead_of_a_list_is_not_echoed() -> None:
    assert SECRET not in str(error_of(BACKEND + TENANT + f'api_keys = "{SECRET}"\n', ENVIRON))


def test_a_clear_key_written_in_the_list_is_not_echoed() -> None:
    assert SECRET[:12] not in str(
        error_of(BACKEND + TENANT + f'api_keys = ["{SECRET}"]\n', ENVIRON)
    )
