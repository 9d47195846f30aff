"""Why would this request go where it goes? `overspill explain` and POST /admin/explain.

Both classify the request's privacy and run the same pure decide() the proxy runs, then report
the ordered targets and every reason, without sending the request anywhere. The admin endpoint
uses the live load, health and breakers; the command line assumes every backend healthy and idle
with the models it declares (point it at a running proxy with --proxy for the live view).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import orjson

from policies.decide import RoutingPlan, decide
from policies.load import BackendLoad, LoadSnapshot
from policies.loader import PolicyError, load_policy
from policies.model import Policy
from policies.privacy import Classification, UnknownLevel
from proxy.endpoints import ENDPOINTS, Endpoint
from proxy.errors import APIError
from proxy.flow import ledger as spend_ledger
from proxy.flow.caller import Caller, caller_of, privacy_of, request_facts
from proxy.flow.gate import TENANT_HEADER, Gate
from proxy.schema import ProxyRequest, parse_request


def explanation(
    request: ProxyRequest, privacy: Classification, plan: RoutingPlan
) -> dict[str, Any]:
    return {
        "model": request.model,
        "privacy": {"level": privacy.level, "because": list(privacy.reasons)},
        "targets": [target.route for target in plan.targets],
        "overflow": plan.overflowed,
        "reasons": list(plan.reasons),
        "refused": not plan.targets,
    }


def offline_snapshot(policy: Policy) -> LoadSnapshot:
    return LoadSnapshot(
        tuple(BackendLoad(b.name, b.kind, True, dict(b.models or {})) for b in policy.backends)
    )


def explain_offline(
    policy: Policy, endpoint: Endpoint, body: bytes, headers: dict[str, str], wall: float
) -> dict[str, Any]:
    """The proxy's own steps (caller, privacy, the facts, decide) on an idle, healthy snapshot;
    a tenant's cloud budget as the policy's spend ledger has it at `wall` (UNIX seconds)."""
    request = parse_request(endpoint, body)
    caller = caller_of(policy, request, headers, headers.get(TENANT_HEADER, ""))
    privacy = privacy_of(policy, request, headers, caller.tenant)
    facts = request_facts(request, privacy.level, caller, _budget_closed(policy, caller, wall))
    plan = decide(facts, policy, offline_snapshot(policy), random.Random(0))
    return explanation(request, privacy, plan)


def _budget_closed(policy: Policy, caller: Caller, wall: float) -> str:
    path = spend_ledger.spend_path(policy)
    gate = Gate(wall=lambda: wall)
    if path is not None:
        gate.restore(spend_ledger.read(path))
    return gate.cloud_closed(caller.tenant)


def add_parser(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "explain", help="show where a request would be routed, and why", description=__doc__
    )
    parser.add_argument("file", type=Path, help="the policy file")
    parser.add_argument("--request", type=Path, required=True, help="a JSON request body")
    parser.add_argument("--endpoint", choices=list(ENDPOINTS), default="chat")
    parser.add_argument("--header", action="append", default=[], metavar="NAME:VALUE")
    parser.add_argument("--proxy", help="a running proxy's URL: explain with its live state")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    headers = {}
    for header in args.header:
        name, _, value = header.partition(":")
        headers[name.strip().lower()] = value.strip()
    body = args.request.read_bytes()
    try:
        if args.proxy:
            result = _ask_proxy(args.proxy, args.endpoint, body, headers)
        else:
            policy = load_policy(args.file)
            result = explain_offline(policy, args.endpoint, body, headers, time.time())
    except PolicyError as error:
        print(error.report(), file=sys.stderr)
        return 2
    except (APIError, UnknownLevel) as error:
        print(f"overspill explain: {error}", file=sys.stderr)
        return 2
    except urllib.error.HTTPError as error:  # the proxy's own OpenAI-shaped error
        print(
            f"overspill explain: {args.proxy} answered {error.code}: {_message(error)}",
            file=sys.stderr,
        )
        if error.code == 401:
            print("  (pass the admin key: --header 'Authorization: Bearer <key>')", file=sys.stderr)
        return 2
    except urllib.error.URLError as error:
        print(f"overspill explain: cannot reach {args.proxy}: {error.reason}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2))
    return 0


def _message(error: urllib.error.HTTPError) -> str:
    try:
        return str(orjson.loads(error.read())["error"]["message"])
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return error.reason or "no message"


def _ask_proxy(url: str, endpoint: str, body: bytes, headers: dict[str, str]) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{url.rstrip('/')}/admin/explain?endpoint={endpoint}",
        data=body,
        headers={"content-type": "application/json", **headers},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        result: dict[str, Any] = orjson.loads(response.read())
        return result
