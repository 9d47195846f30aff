"""`overspill explain` without a proxy (proxy/ops/explain.py explain_offline): the proxy's own steps
on an idle snapshot, so a caller's priority class and a tenant's spent cloud budget weigh in it
as they do in the live path. No processes."""

from __future__ import annotations

from pathlib import Path

import orjson

from policies.budget import Spend, period_start
from policies.loader import parse_policy
from policies.model import Policy
from proxy.flow import ledger
from proxy.ops.explain import explain_offline

WALL = 1_790_000_000.0  # a fixed instant: the ledger's period is the one holding it
BODY = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hello"}]})


def policy(spend_path: Path | None = None) -> Policy:
    server = f'[server]\nspend_path = "{spend_path}"\n' if spend_path else ""
    return parse_policy(
        f"""{server}
[[backends]]
name = "local"
kind = "vllm"
url = "http://127.0.0.1:9"
models = {{ m = "m" }}

[[clouds]]
name = "mini"
model = "openai/gpt-4o-mini"
api_key_env = "UNUSED_KEY"

[[routes]]
model = "m"
cloud = ["mini"]

[priorities]
classes = [
  {{ name = "interactive" }},
  {{ name = "batch", overflow = false, max_wait_s = 0 }},
]

[[tenants]]
name = "acme"
cloud_budget_usd = 1.0
budget_period = "day"
""",
        "f.toml",
        {"UNUSED_KEY": "k"},
    )


def explain(chosen: Policy, headers: dict[str, str]) -> dict[str, object]:
    return explain_offline(chosen, "chat", BODY, headers, WALL)


def test_a_class_that_never_overflows_is_explained_without_the_cloud() -> None:
    chosen = policy()
    assert explain(chosen, {})["targets"] == ["local/local", "cloud/mini"]
    batch = explain(chosen, {"x-overspill-priority": "batch"})
    assert batch["targets"] == ["local/local"]
    assert any("never overflows" in reason for reason in batch["reasons"])  # type: ignore[attr-defined]


def test_a_tenant_whose_budget_the_ledger_shows_spent_is_explained_without_the_cloud(
    tmp_path: Path,
) -> None:
    path = tmp_path / "spend.json"
    chosen = policy(path)
    acme = {"x-overspill-tenant": "acme"}
    assert explain(chosen, acme)["targets"] == ["local/local", "cloud/mini"]  # no ledger yet
    ledger.save({"acme": Spend(period_start("day", WALL), 1.5)}, path)
    spent = explain(chosen, acme)
    assert spent["targets"] == ["local/local"]
    assert any("budget" in reason for reason in spent["reasons"])  # type: ignore[attr-defined]
    assert explain(chosen, {})["targets"] == ["local/local", "cloud/mini"]  # others still may


def test_explaining_reads_a_damaged_ledger_without_touching_it(tmp_path: Path) -> None:
    path = tmp_path / "spend.json"
    path.write_bytes(b"{not json")
    assert explain(policy(path), {"x-overspill-tenant": "acme"})["targets"] == [
        "local/local",
        "cloud/mini",
    ]
    assert path.read_bytes() == b"{not json"  # the proxy moves it aside on start; explain does not
