"""`overspill serve`: load the configuration (or start the demo engines) and run the proxy."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

from policies.loader import PolicyError, load_policy
from policies.model import Policy
from proxy import extras
from proxy.app import build_app
from proxy.demo import PUBLIC_MODEL, demo_fleet
from proxy.serving import Server

DEFAULT_CONFIG = Path("overspill.toml")


def add_parser(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "serve",
        help="run the proxy",
        description="Run the OpenAI-compatible proxy. The configuration is --config, else "
        "$OVERSPILL_CONFIG, else ./overspill.toml; with none of them (or with --demo) it starts "
        "demo engine simulators and serves those.",
    )
    parser.add_argument("--config", type=Path, help="TOML configuration (see config.example.toml)")
    parser.add_argument("--demo", action="store_true", help="start demo engines and serve them")
    parser.add_argument("--host", help="override server.host")
    parser.add_argument("--port", type=int, help="override server.port (0: a free port)")
    parser.add_argument("--log-level", help="override server.log_level")
    parser.set_defaults(run=run)


def _config_path(args: argparse.Namespace) -> Path | None:
    if args.config is not None:
        return Path(args.config)
    if os.environ.get("OVERSPILL_CONFIG"):
        return Path(os.environ["OVERSPILL_CONFIG"])
    return DEFAULT_CONFIG if DEFAULT_CONFIG.exists() else None


def run(args: argparse.Namespace) -> int:
    path = None if args.demo else _config_path(args)
    if path is None:
        host = args.host or "127.0.0.1"
        port = 8080 if args.port is None else args.port
        print("overspill: no configuration given: starting demo engines", file=sys.stderr)
        with demo_fleet(host, port) as fleet:
            print(f"overspill: demo configuration in {fleet.config_path}", file=sys.stderr)
            return _serve(fleet.config_path, args, demo=True)
    return _serve(path, args, demo=False)


def _serve(path: Path, args: argparse.Namespace, demo: bool) -> int:
    try:
        policy = load_policy(path)
    except PolicyError as error:
        print(error.report(), file=sys.stderr)
        return 2
    refused = extras.refusal(policy, extras.installed())
    if refused:
        print(f"overspill: {refused}", file=sys.stderr)
        return 2
    level = args.log_level or policy.server.log_level
    logging.basicConfig(level=level.upper(), format="%(message)s", stream=sys.stderr)
    server = Server(
        build_app(policy, path),
        args.host or policy.server.host,
        policy.server.port if args.port is None else args.port,
        log_level="warning",
        max_connections=policy.server.max_connections,
        header_timeout_s=policy.server.header_timeout_s,
        body_timeout_s=policy.server.body_timeout_s,
    )
    # Until the app installs its SIGHUP handler (a reload), a SIGHUP must not end the process.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    print(
        f"overspill: proxy listening on {server.url} ({len(policy.backends)} backends)", flush=True
    )
    if demo:
        _print_demo_help(server.url, policy)
    server.run()
    return 0


def _print_demo_help(url: str, policy: Policy) -> None:
    names = ", ".join(f"{b.name} ({b.kind})" for b in policy.backends)
    print(
        f"""
  demo engines: {names}
  try it:
    curl -s {url}/v1/chat/completions -H 'content-type: application/json' \\
      -d '{{"model": "{PUBLIC_MODEL}", "messages": [{{"role": "user", "content": "Hello"}}]}}'
    python -c "from openai import OpenAI; c = OpenAI(base_url='{url}/v1', api_key='x'); \\
print(c.chat.completions.create(model='{PUBLIC_MODEL}', \\
messages=[{{'role': 'user', 'content': 'Hello'}}]).choices[0].message.content)"
  status: {url}/admin/status    stop: Ctrl-C
""",
        flush=True,
    )
