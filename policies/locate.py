"""Find the line a TOML key path was written on, so errors can say `file:line`.

tomllib keeps no positions, so this scans the text: the table header that opens the path (the
n-th `[[backends]]` for `backends[n]`), then the key's assignment before the next header. It is a
best effort for messages only; nothing depends on it being found.
"""

from __future__ import annotations

import re

_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_PATH_PART = re.compile(r"([^.\[\]]+)(?:\[(\d+)\])?")


def locate(text: str, path: str) -> int | None:
    """1-based line of `path` (e.g. "backends[1].kind", "server.port") in `text`, if found."""
    lines = text.splitlines()
    parts = [(m.group(1), m.group(2)) for m in _PATH_PART.finditer(path)]
    if parts[-1][1] is not None:  # the path names an array-of-tables entry itself
        entry = _table_start(lines, parts)
        return None if entry is None else entry + 1
    table_parts, key = parts[:-1], parts[-1][0]
    start = _table_start(lines, table_parts)
    if start is None:
        return None
    table = ".".join(p for p, _ in table_parts)
    own_header = f"{table}.{key}" if table else key
    for number in range(start, len(lines)):
        line = lines[number]
        header = _HEADER.match(line)
        if header and header.group(1).replace('"', "") == own_header:
            return number + 1  # the key is a table of its own: [server] or [backends.models]
        if header and number > start and table:
            break
        if not header and re.match(rf"^\s*\"?{re.escape(key)}\"?\s*=", line):
            return number + 1
    return start + 1 if table_parts else None


def _table_start(lines: list[str], parts: list[tuple[str, str | None]]) -> int | None:
    if not parts:
        return 0
    name = ".".join(p for p, _ in parts)
    index = int(parts[-1][1]) if parts[-1][1] is not None else None
    seen = -1
    for number, line in enumerate(lines):
        match = _HEADER.match(line)
        if match and match.group(1).replace('"', "") == name:
            seen += 1
            if index is None or seen == index:
                return number
    return None
