"""config.example.toml, the documented example, is itself a valid configuration."""

from __future__ import annotations

from policies.loader import load_policy
from tests.processes import ROOT


def test_the_example_configuration_loads() -> None:
    policy = load_policy(ROOT / "config.example.toml")
    assert [b.name for b in policy.backends] == ["vllm-a", "vllm-b", "ollama-1", "lmstudio"]
    assert policy.backends[3].models is None
    assert policy.backends[3].api_key_env == "LMSTUDIO_API_KEY"
    assert policy.server.port == 8080
    assert [c.name for c in policy.clouds] == ["openai-mini", "anthropic-haiku"]
    assert policy.routes[0].overflow.ttft_slo_s == 2.0
    assert [level.name for level in policy.privacy.levels] == ["public", "internal", "restricted"]
    assert policy.privacy.detectors["payment_card"] == "restricted"
    assert policy.tenant("hr") is not None
