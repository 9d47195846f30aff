"""Where Overspill keeps what it builds or downloads once (engine environments, model files)."""

from __future__ import annotations

import os
from pathlib import Path


def overspill_home() -> Path:
    """$OVERSPILL_HOME, by default ~/.cache/overspill: outside the repository, shared by runs."""
    return Path(os.environ.get("OVERSPILL_HOME") or Path.home() / ".cache" / "overspill")
