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
    counts = (
        (len(policy.backends), "backend"),
        (len(policy.clouds), "cloud target"),
        (len(policy.routes), "route"),
        (len(policy.privacy.levels), "privacy level"),
        (len(policy.tenants), "tenant"),
    )
    summary = ", ".join(f"{n} {what}{'' if n == 1 else 's'}" for n, what in counts)
    print(f"{args.file}: OK ({summary})")
    return 0
