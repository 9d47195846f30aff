"""proxy/serve.py keeps numpy's BLAS to one thread in the server: after each small product an
idle OpenBLAS worker spun on the other core (2.1 ms of CPU per semantic miss at c=64)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from proxy.serve import one_blas_thread


def blas_threads() -> list[int]:
    return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]


@pytest.fixture
def restored() -> Iterator[None]:
    before = blas_threads()
    yield
    threadpool_limits(max(before, default=1), user_api="blas")


@pytest.mark.usefixtures("restored")
def test_the_server_runs_numpy_products_on_one_blas_thread() -> None:
    np.ones((4, 4)) @ np.ones(4)  # numpy's BLAS loaded
    threadpool_limits(2, user_api="blas")  # as OpenBLAS starts on two cores
    assert max(blas_threads(), default=0) == 2
    one_blas_thread()
    assert blas_threads() == [1] * len(blas_threads())
