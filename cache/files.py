"""Files written whole or not at all: a reader, or a crash, never sees half of one."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


@contextlib.contextmanager
def atomic_file(path: Path, make_folder: bool = True) -> Iterator[BinaryIO]:
    """A file that replaces `path` whole once written (synced first), or not at all; its folder
    made first, if it is missing and `make_folder`."""
    if make_folder:
        path.parent.mkdir(parents=True, exist_ok=True)
    # a name of its own: a save still running in its thread never shares a file with the next
    descriptor, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(descriptor, "wb") as out:  # mkstemp: mode 0600, answers are users' words
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name)
        raise
