"""`overspill serve`: load the configuration (or start the demo engines) and run the proxy."""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import sys
from pathlib import Path
from typing import Any

from policies.identity import admin_warning
from policies.loader import PolicyError, load_policy
from policies.model import Policy
from proxy import extras
from proxy.demo.help import command_name, demo_help
from proxy.demo.run import demo_fleet
from proxy.http.app import build_app
from proxy.http.serving import Server

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
    try:
        return _run(args)
    except KeyboardInterrupt:  # Ctrl-C while starting, before the server handles signals itself
        print("overspill: interrupted while starting", file=sys.stderr)
        return 130


def _run(args: argparse.Namespace) -> int:
    path = None if args.demo else _config_path(args)
    if path is None:
        host = args.host or "127.0.0.1"
        port = 8080 if args.port is None else args.port
        why = "" if args.demo else "no configuration given: "
        print(f"overspill: {why}starting the demo's simulators", file=sys.stderr)
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
    if warning := admin_warning(policy):
        print(f"overspill: warning: {warning}", file=sys.stderr)
    level = args.log_level or policy.server.log_level
    logging.basicConfig(level=level.upper(), format="%(message)s", stream=sys.stderr)
    one_blas_thread()
    server = Server(
        build_app(policy, path),
        args.host or policy.server.host,
        policy.server.port if args.port is None else args.port,
        log_level="warning",
        max_connections=policy.server.max_connections,
        header_timeout_s=policy.server.header_timeout_s,
        body_timeout_s=policy.server.body_timeout_s,
        max_head_bytes=policy.server.max_head_bytes,
        max_headers=policy.server.max_headers,
    )
    # Until the app installs its SIGHUP handler (a reload), a SIGHUP must not end the process.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    print(f"overspill: proxy listening on {server.url} ({_fleet(policy)})", flush=True)
    if demo:
        _print_demo_help(server.url, policy, path)
    # Stopped by Ctrl-C or SIGTERM, after a graceful shutdown: a normal end (the caller's
    # `with` blocks then stop the demo's simulators).
    server.run()
    return 0


def one_blas_thread() -> None:
    """numpy's BLAS on one thread in the proxy: its products are small (a semantic lookup's
    exact index: a few thousand rows of 384), and after each one OpenBLAS's idle worker spins on
    the other core (2.1 ms of CPU per semantic miss at c=64, measured: 15% of a miss's cost).
    The cache's models and faiss are pinned to one thread each already (cache/index.py); the
    names tagger's encoder (the ner extra) runs in the names model's one thread, and a second
    BLAS thread would take the core the event loop needs."""
    try:
        from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]
    except ImportError:  # without the semantic or ner extra: no products worth a second thread
        return
    threadpool_limits(1, user_api="blas")


def _fleet(policy: Policy) -> str:
    clouds = len(policy.clouds)
    targets = f", {clouds} cloud target{'s' if clouds != 1 else ''}" if clouds else ""
    backends = len(policy.backends)
    return f"{backends} backend{'s' if backends != 1 else ''}{targets}"


def _print_demo_help(url: str, policy: Policy, config_path: Path) -> None:
    overspill = command_name(sys.argv[0], shutil.which, Path.cwd())
    print(demo_help(url, policy, config_path, overspill), flush=True)
