"""`overspill sim`: command-line flags -> SimConfig -> a running simulator."""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Any

from proxy.errors import APIError
from proxy.sim.app import SimConfig, build_sim_app
from proxy.sim.faults import Faults, merge_faults, parse_fault_flag
from proxy.sim.profile import FIELD_TYPES, PERSONALITIES, ProfileError, build_profile
from proxy.sim.server import SimServer


def add_parser(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "sim",
        help="run the engine simulator (vLLM, Ollama or cloud personality)",
        description="An OpenAI-compatible engine simulator that models continuous batching, a "
        "prefix KV cache and queueing. Profile values come from the personality's defaults, "
        "then --profile FILE, then the flags below.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    parser.add_argument("--personality", choices=PERSONALITIES, default="vllm")
    parser.add_argument(
        "--model", action="append", default=[], help="served model name (repeatable)"
    )
    parser.add_argument("--profile", type=Path, help="TOML file with an [engine] table")
    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="fault at start, as POST /_sim/faults takes (repeatable)",
    )
    parser.add_argument("--seed", type=int, default=None, help="seed for fault draws")
    parser.add_argument(
        "--record",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="keep a log of requests at /_sim/requests (default: cloud personality only)",
    )
    parser.add_argument("--log-level", default="warning")
    calibration = parser.add_argument_group("calibration (measure a real engine, write a profile)")
    calibration.add_argument("--calibrate", metavar="URL", help="the engine to measure")
    calibration.add_argument("--calibrate-model", help="model to use (default: the first listed)")
    calibration.add_argument(
        "--calibrate-max-batch", type=int, default=16, help="largest batch size to time"
    )
    calibration.add_argument(
        "--out", type=Path, help="where to write the profile (default: stdout)"
    )
    engine = parser.add_argument_group("engine profile (override the profile file)")
    for name, kind in FIELD_TYPES.items():
        engine.add_argument(f"--{name.replace('_', '-')}", dest=f"profile_{name}", type=kind)
    parser.set_defaults(run=run)


def config_from_args(args: argparse.Namespace) -> SimConfig:
    overrides = {
        name: getattr(args, f"profile_{name}")
        for name in FIELD_TYPES
        if getattr(args, f"profile_{name}") is not None
    }
    profile = build_profile(args.personality, args.profile, overrides)
    faults = Faults()
    for flag in args.fault:
        faults = merge_faults(faults, parse_fault_flag(flag))
    return SimConfig(
        personality=args.personality,
        profile=profile,
        models=tuple(args.model),
        faults=faults,
        seed=args.seed if args.seed is not None else random.getrandbits(32),
        record=args.record,
    )


def run(args: argparse.Namespace) -> int:
    if args.calibrate:
        return _calibrate(args)
    try:
        config = config_from_args(args)
    except (ProfileError, APIError) as exc:
        print(f"overspill sim: {exc}", file=sys.stderr)
        return 2
    server = SimServer(build_sim_app(config), args.host, args.port, args.log_level)
    models = ", ".join(config.served_models)
    print(f"overspill sim ({config.personality}: {models}) listening on {server.url}", flush=True)
    server.run()
    return 0


def _calibrate(args: argparse.Namespace) -> int:
    from proxy.sim.calibrate import calibrate

    _, text = calibrate(args.calibrate, args.calibrate_model, args.calibrate_max_batch)
    if args.out:
        args.out.write_text(text)
        print(f"overspill sim: profile written to {args.out}", file=sys.stderr)
    else:
        print(text, end="")
    return 0
