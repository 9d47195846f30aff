"""`overspill check FILE`: validate a policy file; every problem with its line, exit 2 if any.

A valid file may still get warnings (exit 0): a cloud target whose model litellm's price tables
do not price costs $0 by the proxy's count, so no tenant's cloud budget ever closes on it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from policies.loader import PolicyError, load_policy
from policies.model import Policy
from proxy.legs.cloud import Cloud


def add_parser(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "check", help="validate a policy file", description=__doc__
    )
    parser.add_argument("file", type=Path)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        policy = load_policy(args.file)
    except PolicyError as error:
        print(error.report(), file=sys.stderr)
        count = len(error.problems)
        print(f"{args.file}: {count} problem{'s' if count != 1 else ''}", file=sys.stderr)
        return 2
    counts = (
        (len(policy.backends), "backend"),
        (len(policy.clouds), "cloud target"),
        (len(policy.routes), "route"),
        (len(policy.privacy.levels), "privacy level"),
        (len(policy.tenants), "tenant"),
    )
    summary = ", ".join(f"{n} {what}{'' if n == 1 else 's'}" for n, what in counts)
    print(f"{args.file}: OK ({summary})")
    for warning in unpriced(policy):
        print(f"{args.file}: warning: {warning}", file=sys.stderr)
    return 0


def unpriced(policy: Policy) -> list[str]:
    """A warning for each cloud target litellm's tables cannot price (1,000 tokens each way
    priced at $0). litellm is loaded only when the policy has cloud targets."""
    if not policy.clouds:
        return []
    cloud = Cloud()
    try:
        cloud.litellm  # noqa: B018 (the import, to tell a missing extra from a missing price)
    except ImportError:
        return [
            "prices not checked: the cloud extra is not installed (pip install 'overspill[cloud]')"
        ]
    return [
        f"cloud target {target.name!r}: litellm has no price for model {target.model!r}, so "
        "its calls cost $0 by the proxy's count and no tenant's cloud_budget_usd closes on it"
        for target in policy.clouds
        if cloud.price(target, 1_000, 1_000) == 0.0
    ]
