"""`overspill check FILE` as a real process: exit 0 and a summary, or exit 2 and every problem."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.policy_texts import BACKEND
from tests.processes import ROOT

VALID = """\
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

[[clouds]]
name = "azure-eu"
model = "azure/gpt-4o"
api_base = "https://eu.example.azure.com"

[[routes]]
model = "llama"
local = ["gpu-1"]
cloud = ["azure-eu", "openai-mini"]

[routes.overflow]
max_waiting = 4

[[routes]]
model = "qwen"
local = ["mac"]

[privacy]
default = "public"
levels = [
  { name = "public" },
  { name = "internal", cloud = ["azure-eu"] },
  { name = "secret", cloud = "none" },
]
detectors = { payment_card = "secret", email = "internal" }

[[tenants]]
name = "acme"
privacy = "internal"

[[tenants]]
name = "guest"

[breaker]
open_s = 2

[retry]
jitter = false
"""


def check(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "proxy.cli", "check", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_the_example_configuration_checks_ok() -> None:
    result = check(Path("config.example.toml"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("config.example.toml: OK (")
    assert result.stderr == ""


def test_a_valid_file_with_routes_clouds_and_privacy_checks_ok(tmp_path: Path) -> None:
    path = tmp_path / "overspill.toml"
    path.write_text(VALID)
    result = check(path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        f"{path}: OK (2 backends, 2 cloud targets, 2 routes, 3 privacy levels, 2 tenants)\n"
    )


# (file text, the expected problem lines as "LINE: key.path: message").
INVALID = {
    "port out of range": (
        "[server]\nport = 70000\n" + BACKEND,
        ["2: server.port: must be a port number (0-65535), got 70000"],
    ),
    "unknown backend and cloud in a route": (
        BACKEND + '\n[[routes]]\nmodel = "m"\nlocal = ["gpu-9"]\ncloud = ["nowhere"]\n',
        [
            "8: routes[0].local: unknown backend 'gpu-9' (defined: a)",
            "9: routes[0].cloud: unknown cloud target 'nowhere' (defined: none)",
        ],
    ),
    "bad cloud model and duplicate cloud": (
        BACKEND
        + '\n[[clouds]]\nname = "c"\nmodel = "gpt-4o"\n'
        + '\n[[clouds]]\nname = "c"\nmodel = "openai/gpt-4o"\n',
        [
            "8: clouds[0].model: must be litellm's provider/model, e.g. openai/gpt-4o-mini,"
            " got 'gpt-4o'",
            "11: clouds[1].name: duplicate cloud target name 'c'",
        ],
    ),
    "unknown level and detector in privacy": (
        BACKEND + '\n[privacy]\ndefault = "vip"\n\n[privacy.detectors]\nblood_type = "public"\n',
        [
            "7: privacy.default: unknown level 'vip' (levels: public)",
            "10: privacy.detectors.blood_type: unknown detector (expected one of email, phone,"
            " payment_card, us_ssn, iban, ip_address, secret, national_id, passport,"
            " date_of_birth, street_address, record_number, device_id, person, medical)",
        ],
    ),
    "overflow thresholds out of range": (
        BACKEND
        + '\n[[routes]]\nmodel = "m"\n\n[routes.overflow]\n'
        + "max_kv_cache_usage = 1.2\nhysteresis = 1\n",
        [
            "10: routes[0].overflow.max_kv_cache_usage: must be in (0, 1], got 1.2",
            "11: routes[0].overflow.hysteresis: must be in [0, 1), got 1",
        ],
    ),
    "bad retry and breaker settings": (
        BACKEND + "\n[breaker]\nfailure_rate = 2\n\n[retry]\nattempts = 0\njitter = 'yes'\n",
        [
            "7: breaker.failure_rate: must be in (0, 1], got 2",
            "10: retry.attempts: must be greater than 0, got 0",
            "11: retry.jitter: expected true or false, got 'yes'",
        ],
    ),
    "tenant with an unknown level and a duplicate": (
        BACKEND + '\n[[tenants]]\nname = "t"\nprivacy = "vip"\n\n[[tenants]]\nname = "t"\n',
        [
            "8: tenants[0].privacy: unknown level 'vip' (levels: public)",
            "11: tenants[1].name: duplicate tenant name 't'",
        ],
    ),
}


@pytest.mark.parametrize(("text", "expected"), INVALID.values(), ids=INVALID.keys())
def test_an_invalid_file_exits_2_listing_every_problem(
    tmp_path: Path, text: str, expected: list[str]
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    result = check(path)
    assert result.returncode == 2
    assert result.stdout == ""
    count = len(expected)
    summary = f"{path}: {count} problem{'s' if count != 1 else ''}"
    assert result.stderr.splitlines() == [f"{path}:{line}" for line in expected] + [summary]


def test_a_cloud_model_without_a_price_is_warned_of(tmp_path: Path) -> None:
    """Valid, so exit 0; but a model litellm cannot price costs $0 by the proxy's count, so a
    tenant's cloud budget would never close on it: the admin is told which target."""
    path = tmp_path / "overspill.toml"
    path.write_text(
        BACKEND
        + '[[clouds]]\nname = "own-host"\nmodel = "openai/my-finetune"\n'
        + 'api_base = "http://127.0.0.1:9/v1"\n'
        + '[[clouds]]\nname = "mini"\nmodel = "openai/gpt-4o-mini"\n'
    )
    result = check(path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"{path}: OK (")
    warnings = result.stderr.splitlines()
    assert len(warnings) == 1, warnings
    assert "'own-host'" in warnings[0]
    assert "'openai/my-finetune'" in warnings[0]
    assert "no price" in warnings[0]
