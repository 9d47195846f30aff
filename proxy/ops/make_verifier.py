"""`overspill verifier`: make the semantic cache's answer verifier now (once per
$OVERSPILL_HOME, minutes), rather than at the first semantic lookup of a proxy. Set-up and the
test script run it; a current verifier makes it return at once."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from cache.encoders import EmbedderError
from cache.verifier_model import complete, make, verifier_folder
from proxy.home import overspill_home


def add_parser(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "verifier",
        help="make the semantic cache's answer verifier (once; minutes)",
        description="Train the answer verifier from the repository's labelled pairs into "
        "$OVERSPILL_HOME/models (default ~/.cache/overspill), unless a current one is there.",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="say whether a current one is there (exit 1 if not)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    folder = verifier_folder(overspill_home())
    if args.check:
        current = complete(folder)
        print(f"{folder}: {'current' if current else 'missing or out of date'}")
        return 0 if current else 1
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    if not complete(folder):
        print(f"making the answer verifier in {folder} (once: about 14 minutes on 2 cores)...")
    try:
        make(folder)
    except EmbedderError as exc:
        print(f"overspill verifier: {exc}", file=sys.stderr)
        return 1
    print(f"{folder}: current")
    return 0
