"""`overspill demo traffic`: a realistic mix of requests at a running proxy, summarised live.

The mix is proxy/demo/mix.py, the summary proxy/demo/tally.py; here is only the I/O:
requests sent at a steady rate over aiohttp (the proxy's own client, so no test extras are
needed), a line a second, and a bounded end. It stops sending after --seconds and waits a
little for the answers still coming; Ctrl-C stops at once, with the summary so far.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import signal
import sys
import time
from typing import Any

import aiohttp

from proxy.demo.config import TENANTS
from proxy.demo.mix import KINDS, Planned, plan
from proxy.demo.tally import Outcome, Tally, decision_of, final_table

_MAX_IN_FLIGHT = 256  # a proxy that stops answering is not buried under ever more requests
_DRAIN_S = 30.0  # after the last request is sent, how long its answer may still take
_ERROR_EVENT = b'data: {"error"'  # how the proxy ends a stream cut after its start


def add_parser(commands: Any) -> None:
    demo: argparse.ArgumentParser = commands.add_parser(
        "demo", help="things to do with the demo (`overspill serve --demo`)"
    )
    actions = demo.add_subparsers(dest="action", required=True)
    parser: argparse.ArgumentParser = actions.add_parser(
        "traffic",
        help="send a realistic mix of requests to a running demo and summarise where they went",
        description=__doc__,
    )
    parser.add_argument("--url", default="http://127.0.0.1:8080", help="the proxy")
    parser.add_argument("--rps", type=float, default=20.0, help="requests a second")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to send")
    parser.add_argument("--seed", type=int, help="the same mix again")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.rps <= 0 or args.seconds <= 0:
        print("overspill demo traffic: --rps and --seconds must be positive", file=sys.stderr)
        return 2
    rng = random.Random(args.seed)
    return asyncio.run(_main(args.url.rstrip("/"), args.rps, args.seconds, rng))


async def _main(url: str, rps: float, seconds: float, rng: random.Random) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError):  # not on every platform
        loop.add_signal_handler(signal.SIGINT, stop.set)
    timeout = aiohttp.ClientTimeout(total=120, connect=5)
    connector = aiohttp.TCPConnector(limit=_MAX_IN_FLIGHT)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        if not await _reachable(session, url):
            return 1
        print(
            f"overspill demo traffic: {rps:g} requests/s for {seconds:g} s at {url} (Ctrl-C stops)",
            flush=True,
        )
        tally = Tally()
        interrupted = await _drive(session, url, rps, seconds, rng, tally, stop)
    print(("\ninterrupted: " if interrupted else "\n") + "where the requests went")
    print(final_table(tally, KINDS, [t.name for t in TENANTS]), flush=True)
    return 0


async def _reachable(session: aiohttp.ClientSession, url: str) -> bool:
    try:
        async with session.get(url + "/healthz") as response:
            if response.status == 200:
                return True
            problem = f"/healthz answered {response.status}"
    except (aiohttp.ClientError, TimeoutError) as error:
        problem = str(error) or type(error).__name__
    print(f"overspill demo traffic: cannot reach the proxy at {url}: {problem}", file=sys.stderr)
    return False


async def _drive(
    session: aiohttp.ClientSession,
    url: str,
    rps: float,
    seconds: float,
    rng: random.Random,
    tally: Tally,
    stop: asyncio.Event,
) -> bool:
    """Send for `seconds` (a line a second), then wait for the answers. True: interrupted."""
    started = time.monotonic()
    pending: set[asyncio.Task[None]] = set()
    reporter = asyncio.create_task(_report(tally, pending, started))
    try:
        ticks = 0
        while (due := started + ticks / rps) < started + seconds:
            if await _wait(stop, due - time.monotonic()):
                return True
            ticks += 1
            if len(pending) >= _MAX_IN_FLIGHT:
                tally.skipped += 1
                continue
            task = asyncio.create_task(_record(session, url, plan(rng), tally))
            pending.add(task)
            task.add_done_callback(pending.discard)
        await _drain(pending, stop)
        return stop.is_set()
    finally:
        tally.unanswered = len(pending)
        for task in (*pending, reporter):
            task.cancel()
        await asyncio.gather(*pending, reporter, return_exceptions=True)


async def _drain(pending: set[asyncio.Task[None]], stop: asyncio.Event) -> None:
    """Wait for the answers still coming, at most _DRAIN_S, or until Ctrl-C."""
    if not pending:
        return
    answered: asyncio.Future[Any] = asyncio.gather(*pending, return_exceptions=True)
    stopped: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
    await asyncio.wait({answered, stopped}, timeout=_DRAIN_S, return_when="FIRST_COMPLETED")
    stopped.cancel()


async def _wait(stop: asyncio.Event, seconds: float) -> bool:
    """Sleep up to `seconds`; True if stopped meanwhile."""
    if seconds > 0:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), seconds)
    return stop.is_set()


async def _report(tally: Tally, pending: set[asyncio.Task[None]], started: float) -> None:
    while True:
        await asyncio.sleep(1.0)
        print(tally.live_line(time.monotonic() - started, len(pending)), flush=True)


async def _record(session: aiohttp.ClientSession, url: str, planned: Planned, tally: Tally) -> None:
    decision, first_byte_s = await _send(session, url, planned)
    tally.add(Outcome(planned.kind, planned.tenant, decision, planned.stream, first_byte_s))


async def _send(
    session: aiohttp.ClientSession, url: str, planned: Planned
) -> tuple[str, float | None]:
    """The proxy's decision for one request, and when its first body byte came."""
    started = time.monotonic()
    first_byte_s = None
    tail = b""  # the end of what came so far: an error event may span two chunks
    try:
        async with session.post(
            url + "/v1/chat/completions", json=planned.body, headers=planned.headers
        ) as response:
            async for chunk in response.content.iter_any():
                if first_byte_s is None:
                    first_byte_s = time.monotonic() - started
                tail = (tail + chunk)[-256:]
                if planned.stream and _ERROR_EVENT in tail:
                    return "error", first_byte_s
            route = response.headers.get("x-overspill-route")
            return decision_of(response.status, route), first_byte_s
    except (aiohttp.ClientError, TimeoutError):
        return "error", first_byte_s
