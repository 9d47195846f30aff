"""tests/unit's promise, kept by its conftest: a unit test that opens a socket or starts a
process fails, so nothing slow or machine-dependent creeps into the folder."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest


def test_a_unit_test_cannot_connect_a_socket() -> None:
    with pytest.raises(AssertionError, match="belongs in tests/integration"):
        socket.create_connection(("127.0.0.1", 9), timeout=1)


def test_a_unit_test_cannot_listen() -> None:
    with socket.socket() as listener, pytest.raises(AssertionError, match="opened a socket"):
        listener.bind(("127.0.0.1", 0))


def test_a_unit_test_cannot_start_a_process() -> None:
    with pytest.raises(AssertionError, match="started a process"):
        subprocess.run([sys.executable, "-c", "pass"], check=False)
