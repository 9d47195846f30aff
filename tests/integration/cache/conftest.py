"""The cache tests' shared Overspill home: the ONNX models exported into it once per run (an
export takes ~10 s), shared by pytest-xdist's workers too: the export's own file lock lets one
of them export while the other waits and loads it. Tests that damage or re-export a model copy
it or use a home of their own."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cache.embedder import load_encoder


@pytest.fixture(scope="session")
def made_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home whose ONNX models were exported here, by this run's first load."""
    run = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        run = run.parent  # each worker's folder sits in the run's; the home goes beside them
    path = run / "overspill-home"
    path.mkdir(exist_ok=True)
    load_encoder("onnx", path)
    return path
