"""The layout is the architecture: no import circle, and each room imports only the rooms below
it (proxy/legs < proxy/flow < proxy/ops < proxy/http), so no module calls up into its caller.
Imports under `if TYPE_CHECKING:` name types only and are left out."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("proxy", "policies", "cache")
# a room may import the rooms before it in this list, never those after it
ROOMS = ("proxy.legs", "proxy.flow", "proxy.ops", "proxy.http")


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _runtime_imports(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.Import | ast.ImportFrom):
                yield inner


def imports_of(path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of ours that `path` imports when it runs (a module named by `from package
    import module` counts as that module)."""
    found = set()
    for node in _runtime_imports(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in known}
        elif node.module and node.level == 0:
            found |= {f"{node.module}.{a.name}" for a in node.names} & known.keys()
            if node.module in known and known[node.module].name != "__init__.py":
                found.add(node.module)
    return found


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(path, known) for name, path in known.items()}


def find_circle(edges: dict[str, set[str]]) -> list[str]:
    """One import circle, as the modules along it, or [] when there is none."""
    state: dict[str, int] = {}  # 1: being visited, 2: done
    trail: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        trail.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*trail[trail.index(nxt) :], nxt]
            if nxt not in state and (circle := visit(nxt)):
                return circle
        trail.pop()
        state[node] = 2
        return []

    for node in sorted(edges):
        if node not in state and (circle := visit(node)):
            return circle
    return []


def room_of(module: str) -> int | None:
    for rank, room in enumerate(ROOMS):
        if module == room or module.startswith(room + "."):
            return rank
    return None


def test_the_finder_sees_a_circle() -> None:
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_import_circle() -> None:
    edges = graph()
    assert "proxy.flow.chain" in edges["proxy.flow.pipeline"]  # the graph is read at all
    assert find_circle(edges) == []


def test_each_room_imports_only_the_rooms_below_it() -> None:
    upward = []
    for module, imported in graph().items():
        rank = room_of(module)
        if rank is None:
            continue
        for target in imported:
            target_rank = room_of(target)
            if target_rank is not None and target_rank > rank:
                upward.append(f"{module} -> {target}")
    assert upward == []


def test_the_libraries_know_nothing_of_the_proxy() -> None:
    """policies/ and cache/ are pure libraries the proxy uses, never the other way round."""
    leaks = [
        f"{module} -> {target}"
        for module, imported in graph().items()
        if module.split(".")[0] in ("policies", "cache")
        for target in imported
        if target.startswith("proxy")
    ]
    assert leaks == []
