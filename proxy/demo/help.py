"""What `overspill serve --demo` prints once it listens: what runs, and what to try (pure)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from policies.model import Policy
from proxy.demo.config import CLOUD, PUBLIC_MODEL, TENANTS


def command_name(argv0: str, which: Callable[[str], str | None], cwd: Path) -> str:
    """How to run `overspill` again, as this process was run: `overspill` when it is on the
    PATH, else the path it was started by (scripts/serve runs .venv/bin/overspill)."""
    if Path(argv0).name != "overspill":
        return "python -m proxy.cli"
    started = Path(argv0).resolve()
    found = which("overspill")
    if found is not None and Path(found).resolve() == started:
        return "overspill"
    return os.path.relpath(started, cwd) if started.is_relative_to(cwd) else str(started)


def demo_help(url: str, policy: Policy, config_path: Path, overspill: str) -> str:
    names = ", ".join(backend.name for backend in policy.backends)
    slots = sum(backend.max_concurrency or 0 for backend in policy.backends)
    cloud = (policy.cloud(CLOUD).api_base or "").removesuffix("/v1")
    body = (
        f'{{"model": "{PUBLIC_MODEL}", "max_tokens": 32, '
        '"messages": [{"role": "user", "content": "What is an overspill?"}]}'
    )
    key = next(t.key for t in TENANTS if t.key)
    return f"""
  The demo: {PUBLIC_MODEL} on {len(policy.backends)} small local engines (simulators: {names};
  {slots} requests at once in all), overflowing to a simulated cloud ({CLOUD}, through litellm).
  The configuration, commented (copy it to start your own): {config_path}

  Try it; the X-Overspill-Route and X-Overspill-Cache headers say where each answer came from:
    curl -si {url}/v1/chat/completions -H 'content-type: application/json' \\
      -H 'x-overspill-tenant: support' -d '{body}'
      (the same again: from the cache; with an e-mail address in it: local, never the cloud)
    python -c "from openai import OpenAI; c = OpenAI(base_url='{url}/v1', \\
api_key='{key}'); print(c.chat.completions.create(model='{PUBLIC_MODEL}', \\
messages=[{{'role': 'user', 'content': 'Hello'}}]).choices[0].message.content)"
    {overspill} demo traffic --url {url}
      (60 s of repeats, paraphrases, personal data, two tenants, streams; a summary every second)

  Tenants: {_tenants()}
  Watch:   {url}/admin     the dashboard
           {url}/metrics   for Prometheus
           {cloud}/_sim/requests   what reached the cloud
  Stop:    Ctrl-C
"""


def _tenants() -> str:
    width = max(len(tenant.name) for tenant in TENANTS) + 2
    lines = []
    for tenant in TENANTS:
        how = f"api_key {tenant.key}" if tenant.key else f"header X-Overspill-Tenant: {tenant.name}"
        if tenant.requests_per_minute:
            how += f", {tenant.requests_per_minute} requests a minute (then 429)"
        lines.append(f"{tenant.name:<{width}}{how}")
    return "\n           ".join(lines)
