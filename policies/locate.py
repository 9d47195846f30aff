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
    """1-based line of `path` (e.g. "backends[1].kind", "server.port") in `text`, if found.

    Inside inline tables (`levels = [{...}]`) it points at the line of the enclosing key."""
    lines = text.splitlines()
    parts = [(m.group(1), m.group(2)) for m in _PATH_PART.finditer(path)]
    found = _locate(lines, parts)
    if found is not None:
        return found
    for keep in range(len(parts), 0, -1):
        # An item of a plain list (`keys = ["a", "b"]`), or inside an inline table: the
        # enclosing key's own assignment (never a table header).
        sub = [*parts[: keep - 1], (parts[keep - 1][0], None)]
        line = _locate(lines, sub)
        if line is not None and not _HEADER.match(lines[line - 1]):
            return line
    return None


def _locate(lines: list[str], parts: list[tuple[str, str | None]]) -> int | None:
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
        header = _HEADER.match(lines[number])
        if header and header.group(1).replace('"', "") == own_header:
            return number + 1  # the key is a table of its own: [server] or [backends.models]
        if header and number > start and table:
            break
        if not header and re.match(rf"^\s*\"?{re.escape(key)}\"?\s*=", lines[number]):
            return number + 1
    return start + 1 if table_parts else None


def _table_start(lines: list[str], parts: list[tuple[str, str | None]]) -> int | None:
    """Line index of the table `parts` names; each level is searched after its parent, so
    `routes[1].overflow` is the [routes.overflow] under the second [[routes]]."""
    position = 0
    for depth in range(1, len(parts) + 1):
        name = ".".join(p for p, _ in parts[:depth])
        index = parts[depth - 1][1]
        found = _nth_header(lines, name, int(index or 0), position)
        if found is None:
            if depth == len(parts) or index is not None:
                return None
            continue  # an implicit parent: [a.b] written without [a]
        position = found
    return position if parts else 0


def _nth_header(lines: list[str], name: str, index: int, start: int) -> int | None:
    seen = -1
    for number in range(start, len(lines)):
        match = _HEADER.match(lines[number])
        if match and match.group(1).replace('"', "") == name:
            seen += 1
            if seen == index:
                return number
    return None
