"""The cache on disk, so that it survives a restart; written off the hot path.

One file: a header line, then one JSON line per entry (its keys, answer, times and vector). It
is written to a temporary file that replaces the old one, so a crash mid-write leaves the last
good copy. A missing file is an empty cache; a corrupted one is moved aside (`.corrupt`) and the
cache starts empty: never fatal, and the evidence is kept for whoever looks into it.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
from pathlib import Path

import numpy as np
import orjson

from cache.files import atomic_file
from cache.keys import CacheKeys
from cache.store import Entry

log = logging.getLogger("overspill")
FORMAT = b"overspill-cache 1"


def save(entries: list[Entry], path: Path) -> None:
    with atomic_file(path) as out:
        out.write(FORMAT + b"\n")
        for entry in entries:
            out.write(orjson.dumps(_record(entry)) + b"\n")


def load(path: Path) -> list[Entry]:
    try:
        with open(path, "rb") as source:
            if source.readline().rstrip(b"\n") != FORMAT:
                raise ValueError("not an Overspill cache file (or another version of it)")
            return [_entry(orjson.loads(line)) for line in source if line.strip()]
    except FileNotFoundError:
        return []
    except (OSError, ValueError, KeyError, TypeError) as error:
        aside = path.with_name(path.name + ".corrupt")
        log.warning(
            "cache file %s unreadable (%s): moved to %s, starting empty", path, error, aside
        )
        with contextlib.suppress(OSError):
            os.replace(path, aside)
        return []


def _record(entry: Entry) -> dict[str, object]:
    vector = None if entry.vector is None else base64.b64encode(entry.vector.tobytes()).decode()
    keys = entry.keys
    return {
        "scope": keys.scope,
        "exact": keys.exact,
        "context": keys.context,
        "query": keys.query,
        "answer": entry.answer.decode(),
        "created": entry.created,
        "expires": entry.expires,
        "vector": vector,
        "usage_unknown": entry.usage_unknown,
    }


def _entry(record: dict[str, object]) -> Entry:
    keys = CacheKeys(
        str(record["scope"]),
        str(record["exact"]),
        _optional(record["context"]),
        _optional(record["query"]),
    )
    raw = record["vector"]
    vector = None if raw is None else np.frombuffer(base64.b64decode(str(raw)), dtype=np.float32)
    created, expires = record["created"], record["expires"]
    if not isinstance(created, float | int) or not isinstance(expires, float | int):
        raise TypeError("created and expires must be numbers")
    answer = str(record["answer"]).encode()
    unknown = record.get("usage_unknown") is True  # absent in files written before it was kept
    return Entry(0, keys, answer, float(created), float(expires), vector, unknown)


def _optional(value: object) -> str | None:
    return None if value is None else str(value)
