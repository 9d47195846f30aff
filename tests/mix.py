"""A policy for a mix of traffic, shared by the tests that count it (metrics, log, dashboard):
model "m" on a local simulator, model "hosted" only in the cloud (a cloud simulator through
litellm), tenant "acme" without limits and tenant "limited" allowed one request, then another
only a minute later: its second and third requests are refused however slowly they come."""

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
requests_per_minute = 1
burst_s = 60
{extra}
"""
