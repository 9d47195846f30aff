"""Waiting for events instead of for time, shared by the tests that drive real processes.

A test asserts behaviour, never how fast this machine is (issue 14): where it needs something
to have happened (a probe noticed, a log line was written, a request is queued), it polls for
that event. The deadlines below only bound a hang; they are never what a test asserts, so they
are generous enough for a slow machine with its other core busy.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeVar

import httpx

T = TypeVar("T")

DEADLINE_S = 60.0  # bounds a hang; the tests' own timeout (pytest-timeout) is larger still
POLL_S = 0.02


def wait_until(condition: Callable[[], T], what: str, timeout: float = DEADLINE_S) -> T:
    """Poll `condition` until it returns something truthy, and return that."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g} s: {what}")
        time.sleep(POLL_S)


async def eventually(
    condition: Callable[[], Awaitable[T]], what: str, within_s: float = DEADLINE_S
) -> T:
    """`wait_until` for async tests: the condition is awaited, the loop keeps running."""
    try:
        async with asyncio.timeout(within_s):
            while True:
                result = await condition()
                if result:
                    return result
                await asyncio.sleep(POLL_S)
    except TimeoutError:
        raise AssertionError(f"not within {within_s:g} s: {what}") from None


def status(proxy_url: str) -> dict[str, Any]:
    result: dict[str, Any] = httpx.get(proxy_url + "/admin/status", timeout=30).json()
    return result


def in_flight(proxy_url: str, backend: str) -> int:
    """Requests the proxy has in flight at `backend` (its exact count, not a probe's)."""
    return int(next(b["in_flight"] for b in status(proxy_url)["backends"] if b["name"] == backend))


def queued(proxy_url: str, model: str) -> int:
    """Requests waiting in the proxy's waiting room for `model` (a route must name it)."""
    return int(next(r["waiting"] for r in status(proxy_url)["routes"] if r["model"] == model))


def route_of(response: httpx.Response) -> str:
    return response.headers["x-overspill-route"]


@contextlib.contextmanager
def held(
    url: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> Iterator[httpx.Response]:
    """A streamed request kept in flight for as long as the block runs: a structural way to
    keep a backend busy, where a long request would only be busy for as long as it lasts.

    Its first event has arrived on entry (it is routed and counted in flight); leaving closes
    the connection, and the proxy then aborts it upstream. `body` should ask for far more
    tokens than the block needs (the stream must not end by itself while held)."""
    with (
        httpx.Client(timeout=60) as client,
        client.stream(
            "POST", url + "/v1/chat/completions", json=body, headers=headers or {}
        ) as response,
    ):
        assert response.status_code == 200, response.read()
        lines = response.iter_lines()
        assert any(line.startswith("data: ") for line in lines)
        yield response


@contextlib.asynccontextmanager
async def held_async(
    client: httpx.AsyncClient, body: dict[str, Any], headers: dict[str, str] | None = None
) -> AsyncIterator[httpx.Response]:
    """`held` on an async client (a base_url client), for tests that run bursts beside it."""
    async with client.stream(
        "POST", "/v1/chat/completions", json=body, headers=headers or {}
    ) as response:
        assert response.status_code == 200, await response.aread()
        # Kept referenced: an abandoned line iterator is finalised by the event loop, and that
        # closes the connection under the held stream (the proxy then aborts it upstream).
        lines = response.aiter_lines()
        async for line in lines:
            if line.startswith("data: "):
                break
        yield response
        await lines.aclose()
