"""A policy for a mix of traffic, shared by the tests that count it (metrics, log, dashboard):
model "m" on a local simulator, model "hosted" only in the cloud (a cloud simulator through
litellm), tenant "acme" without limits and tenant "limited" allowed one request a second."""

from __future__ import annotations

from tests.processes import backend_toml, cloud_toml


def mixed_policy(engine: str, cloud: str, server: str = "", extra: str = "") -> str:
    return f"""
[server]
probe_interval_s = 0.2
{server}
{backend_toml("local", "vllm", engine, {"m": "m"})}
{cloud_toml("mini", cloud)}
[[routes]]
model = "hosted"
cloud = ["mini"]
[[tenants]]
name = "acme"
[[tenants]]
name = "limited"
requests_per_minute = 60
burst_s = 1
{extra}
"""
