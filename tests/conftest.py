from __future__ import annotations

import pytest

# Simulator timings used by most tests: fast enough for a 2-core CI, slow enough to measure.
FAST = ("--decode-base-ms", "2", "--decode-per-seq-ms", "0.1", "--prefill-ms-per-token", "0.01")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "asyncio" in item.keywords:
            item.add_marker(pytest.mark.timeout(120))
