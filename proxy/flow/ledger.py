"""Cloud spend on disk, so that a restart does not reopen a tenant's spent budget.

A small JSON file (tenant -> the period's start and its spend), replaced atomically; written a
moment after spend changes and at shutdown, off the request path. A missing file is no spend; a
corrupted one is moved aside (`.corrupt`) and logged: never fatal.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

import orjson

from cache.files import atomic_file
from policies.budget import Spend
from policies.model import Policy

log = logging.getLogger("overspill")


_UNREADABLE = (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError)


def spend_path(policy: Policy) -> Path | None:
    path = policy.server.spend_path
    return Path(path).expanduser() if path else None


def read(path: Path) -> dict[str, Spend]:
    """The ledger as it is, touching nothing (`overspill explain`): missing or unreadable is no
    spend, as the proxy would start with."""
    try:
        return _parsed(path.read_bytes())
    except (FileNotFoundError, *_UNREADABLE):
        return {}


def load(path: Path) -> dict[str, Spend]:
    try:
        return _parsed(path.read_bytes())
    except FileNotFoundError:
        return {}
    except _UNREADABLE as error:
        aside = path.with_name(path.name + ".corrupt")
        with contextlib.suppress(OSError):
            path.replace(aside)
        log.warning(
            "spend ledger %s unreadable (%s): moved to %s, starting empty", path, error, aside
        )
        return {}


def _parsed(raw: bytes) -> dict[str, Spend]:
    ledger = orjson.loads(raw)
    return {tenant: Spend(float(s["start"]), float(s["usd"])) for tenant, s in ledger.items()}


def save(spend: dict[str, Spend], path: Path) -> None:
    with atomic_file(path) as out:
        out.write(orjson.dumps({t: {"start": s.start, "usd": s.usd} for t, s in spend.items()}))
