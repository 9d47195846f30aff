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

from cache.persist import atomic_file
from policies.budget import Spend

log = logging.getLogger("overspill")


def load(path: Path) -> dict[str, Spend]:
    try:
        raw = orjson.loads(path.read_bytes())
        return {tenant: Spend(float(s["start"]), float(s["usd"])) for tenant, s in raw.items()}
    except FileNotFoundError:
        return {}
    except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError) as error:
        aside = path.with_name(path.name + ".corrupt")
        with contextlib.suppress(OSError):
            path.replace(aside)
        log.warning("spend ledger %s unreadable (%s): moved to %s, starting empty", path, error,
                    aside)  # fmt: skip
        return {}


def save(spend: dict[str, Spend], path: Path) -> None:
    with atomic_file(path) as out:
        out.write(orjson.dumps({t: {"start": s.start, "usd": s.usd} for t, s in spend.items()}))
