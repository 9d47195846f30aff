"""tests/unit: pure logic, and the request path with fake legs and an injected clock. A unit
test opens no socket and starts no process (this fixture fails one that does), so the folder
runs in seconds on any machine: `pytest tests/unit`. Everything that needs a real process, a
socket or the embedding model lives in tests/integration and tests/e2e."""

from __future__ import annotations

import socket
import subprocess
from typing import Any, NoReturn

import pytest


def _refuse(what: str) -> Any:
    def refused(*args: object, **kwargs: object) -> NoReturn:
        raise AssertionError(f"a unit test {what}: it belongs in tests/integration")

    return refused


@pytest.fixture(autouse=True)
def no_sockets_no_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("connect", "connect_ex", "bind"):
        monkeypatch.setattr(socket.socket, name, _refuse(f"opened a socket ({name})"))
    monkeypatch.setattr(subprocess.Popen, "__init__", _refuse("started a process"))
