"""`overspill check FILE`: validate a policy file; every problem with its line, exit 2 if any."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from policies.loader import PolicyError, load_policy


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
    print(
        f"{args.file}: OK ({len(policy.backends)} backends, {len(policy.clouds)} cloud targets, "
        f"{len(policy.routes)} routes, {len(policy.privacy.levels)} privacy levels, "
        f"{len(policy.tenants)} tenants)"
    )
    return 0
