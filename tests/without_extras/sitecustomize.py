"""Put on PYTHONPATH by tests/integration/proxy/test_extras.py: the modules named in
$OVERSPILL_WITHOUT cannot be imported in this process, as in an install without those extras.
Python imports a sitecustomize module at start from anywhere on its path."""

from __future__ import annotations

import importlib.abc
import os
import sys
from collections.abc import Sequence
from types import ModuleType

WITHOUT = frozenset(filter(None, os.environ.get("OVERSPILL_WITHOUT", "").split(",")))


class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> None:
        if name.split(".")[0] in WITHOUT:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


if WITHOUT:
    sys.meta_path.insert(0, NotInstalled())
