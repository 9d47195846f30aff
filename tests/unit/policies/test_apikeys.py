"""policies/apikeys.py: key digests, "sha256:" and "env:" declarations, bearer tokens."""

from __future__ import annotations

import hashlib

import pytest

from policies.apikeys import FORMS, bearer, declared_digest, digest

KEY = "sk-live-4f9a8b7c6d5e3f2a1b0c"
HEX = hashlib.sha256(KEY.encode()).hexdigest()


def refusal(spec: str, environ: dict[str, str] | None = None) -> str:
    with pytest.raises(ValueError, match=r".") as caught:
        declared_digest(spec, environ or {})
    return str(caught.value)


def test_digest_is_the_sha256_hex_of_the_key() -> None:
    assert digest(KEY) == HEX
    assert digest("") == hashlib.sha256(b"").hexdigest()


def test_a_sha256_declaration_stands_for_its_digest() -> None:
    assert declared_digest(f"sha256:{HEX}", {}) == HEX


def test_a_sha256_declaration_in_upper_case_is_normalised() -> None:
    assert declared_digest(f"sha256:{HEX.upper()}", {}) == HEX


@pytest.mark.parametrize(
    "value",
    [HEX[:-1], HEX + "0", "", "g" * 64, HEX[:-1] + " ", HEX[:32] + "-" + HEX[33:]],
    ids=["63 digits", "65 digits", "empty", "not hex", "a space", "a dash"],
)
def test_a_sha256_declaration_must_be_64_hex_digits(value: str) -> None:
    message = refusal(f"sha256:{value}")
    assert "64 hex digits" in message
    assert f"got {len(value)} characters" in message


def test_a_clear_key_after_sha256_is_not_echoed() -> None:
    message = refusal(f"sha256:{KEY}")
    assert KEY not in message
    assert KEY[8:14] not in message


def test_an_env_declaration_is_the_digest_of_the_variables_value() -> None:
    assert declared_digest("env:ACME_KEY", {"ACME_KEY": KEY}) == HEX


def test_an_env_declaration_reads_only_the_given_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OVERSPILL_TEST_KEY", KEY)
    assert "OVERSPILL_TEST_KEY is not set" in refusal("env:OVERSPILL_TEST_KEY", {})


def test_an_unset_variable_is_refused_by_name() -> None:
    assert refusal("env:ACME_KEY", {"OTHER": KEY}) == "environment variable ACME_KEY is not set"


def test_an_empty_variable_counts_as_unset() -> None:
    assert refusal("env:ACME_KEY", {"ACME_KEY": ""}) == "environment variable ACME_KEY is not set"


@pytest.mark.parametrize("name", ["", "1KEY", "ACME-KEY", "ACME KEY", "$ACME"])
def test_a_bad_variable_name_is_refused(name: str) -> None:
    assert refusal(f"env:{name}", {name: KEY}) == (
        "what follows env: is not an environment variable name"
    )


@pytest.mark.parametrize("spec", ["md5:abc", "SHA256:" + HEX, "ENV:ACME_KEY", "", "ACME_KEY"])
def test_an_unknown_scheme_is_refused_naming_the_forms(spec: str) -> None:
    assert refusal(spec, {"ACME_KEY": KEY}) == f"expected {FORMS}"


def test_a_clear_key_written_in_place_of_a_declaration_is_not_echoed() -> None:
    assert KEY[:12] not in refusal(KEY)


def test_a_key_written_after_env_is_not_echoed() -> None:
    assert KEY not in refusal(f"env:{KEY}")


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer abc", "abc"),
        ("bearer abc", "abc"),
        ("BEARER abc", "abc"),
        ("  Bearer   abc  ", "abc"),
        ("Bearer", None),
        ("Bearer ", None),
        ("Bearer    ", None),
        ("Basic dXNlcjpwYXNz", None),
        ("abc", None),
        ("", None),
        (None, None),
    ],
)
def test_bearer_takes_the_token_of_a_bearer_header_only(
    header: str | None, token: str | None
) -> None:
    assert bearer(header) == token


def test_a_key_read_from_the_environment_loses_surrounding_whitespace() -> None:
    """`export KEY=$(cat key.txt)` keeps no newline, but a .env file or a secret mount may:
    bearer() strips the token, so the declared digest must be of the stripped key."""
    assert declared_digest("env:K", {"K": " sk-x\n"}) == digest("sk-x")
