"""The cache tests' shared Overspill home: the ONNX models exported into it once per run (an
export takes ~10 s). Tests that damage or re-export a model copy it or use a home of their own."""

from __future__ import annotations

from pathlib import Path

import pytest

from cache.embedder import load_encoder


@pytest.fixture(scope="session")
def made_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home whose ONNX models were exported here, by this run's first load."""
    path = tmp_path_factory.mktemp("overspill-home")
    load_encoder("onnx", path)
    return path
