"""The `overspill` command: one sub-command per product part."""

from __future__ import annotations

import argparse
import sys

from proxy import serve
from proxy.demo import traffic as demo_traffic
from proxy.engine_setup import cli as engine_cli
from proxy.ops import check, explain, make_verifier, names_training
from proxy.sim import cli as sim_cli


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="overspill",
        description="OpenAI-compatible routing proxy over local engines, overflowing to the cloud.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    serve.add_parser(commands)
    check.add_parser(commands)
    explain.add_parser(commands)
    sim_cli.add_parser(commands)
    engine_cli.add_parser(commands)
    demo_traffic.add_parser(commands)
    make_verifier.add_parser(commands)
    names_training.add_parser(commands)
    args = parser.parse_args(argv)
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
