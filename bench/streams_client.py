"""The client of bench/streams.py: many concurrent SSE streams from one cheap process.

Run as its own process (pinned to the core the server under test is not on), it keeps `--streams`
chat completions (stream=true, every body distinct) in flight for `--seconds`: each of its workers
starts a new stream as soon as its last one ends (their first streams are spread over `--ramp-s`,
so arrivals do not all come in one burst). It then waits up to `--drain-s` for those still open,
and prints one JSON summary on stdout (`Summary.to_json`).

What it records per stream is the arrival time of each SSE event that carries a token (read by
read, split on blank lines: no JSON is parsed unless a status or an event says error), so the
gaps are what a client sees between tokens, however a server cuts or batches its writes.

    python -m bench.streams_client --url URL --streams 1000 --seconds 15 --tokens 32 --tag t1
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import resource
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field

import aiohttp
import orjson

from bench.loadgen import BENCH_KEY

DONE = b"[DONE]"
_WORDS = (
    "river atlas copper lantern meadow orbit violet harbor quartz ember willow falcon cedar "
    "glacier saffron tundra maple comet basalt juniper canyon marble zephyr thistle cobalt"
).split()


# -- what a stream's bytes say (pure) ---------------------------------------------------------


@dataclass
class SSEReader:
    """Cuts a stream's bytes into events, however they were split, and notes each token's time.

    The role-only opener (vLLM writes it with the first token) is not a token; `[DONE]` ends the
    stream; an event that is an error body (`data: {"error": ...}`) is the stream's error."""

    token_times: list[float] = field(default_factory=list)
    done: bool = False
    error: str | None = None
    _rest: bytes = b""

    def feed(self, data: bytes, now: float) -> None:
        events = (self._rest + data).split(b"\n\n")
        self._rest = events.pop()
        for event in events:
            self._event(event, now)

    def _event(self, event: bytes, now: float) -> None:
        payload = event.removeprefix(b"data:").strip()
        if not payload:
            return
        if payload == DONE:
            self.done = True
        elif payload.startswith(b'{"error"'):
            self.error = f"stream error: {error_message(payload)}"
        elif b'"role"' not in payload:
            self.token_times.append(now)


def error_message(body: bytes, limit: int = 200) -> str:
    """The message of an OpenAI-shaped error body, else the body's start."""
    try:
        message = str(orjson.loads(body)["error"]["message"])
    except (orjson.JSONDecodeError, KeyError, TypeError):
        message = body.decode("utf-8", "replace").strip()
    return message[:limit]


@dataclass(frozen=True)
class StreamRecord:
    """One stream as the client saw it: when it was sent, its tokens' arrival times, its error."""

    started_at: float
    token_times: tuple[float, ...]
    error: str | None = None

    @property
    def completed(self) -> bool:
        return self.error is None

    @property
    def ttft(self) -> float | None:
        return self.token_times[0] - self.started_at if self.token_times else None

    def gaps(self) -> list[float]:
        """The time between each token and the next, as they arrived."""
        times = self.token_times
        return [later - earlier for earlier, later in itertools.pairwise(times)]


def record_of(started_at: float, reader: SSEReader, tokens: int) -> StreamRecord:
    """A finished read: an error if the stream said so, ended early, or fell short of tokens."""
    times = tuple(reader.token_times)
    error = reader.error
    if error is None and not reader.done:
        error = "stream ended without [DONE]"
    if error is None and len(times) != tokens:
        error = f"{len(times)} tokens, {tokens} asked"
    return StreamRecord(started_at, times, error)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank percentile (q in 0-100) of `values`; None for none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def tally(records: Iterable[StreamRecord]) -> dict[str, int]:
    """Errors by kind, the most frequent first."""
    kinds = Counter(r.error for r in records if r.error is not None)
    return dict(kinds.most_common())


@dataclass(frozen=True)
class Summary:
    """A cell's streams in a few figures (milliseconds), and the client's own CPU."""

    started: int
    completed: int
    errors: dict[str, int]
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None
    gap_p50_ms: float | None
    gap_p99_ms: float | None
    gaps: int
    client_cpu_s: float = 0.0
    seconds: float = 0.0

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Summary:
        return cls(**json.loads(text))


def summarize(records: Sequence[StreamRecord], client_cpu_s: float, seconds: float) -> Summary:
    """TTFT over the streams that produced a token; gaps over every token of every stream."""
    ttfts = [t for t in (r.ttft for r in records) if t is not None]
    gaps = [gap for r in records for gap in r.gaps()]
    return Summary(
        started=len(records),
        completed=sum(1 for r in records if r.completed),
        errors=tally(records),
        ttft_p50_ms=_ms(percentile(ttfts, 50)),
        ttft_p99_ms=_ms(percentile(ttfts, 99)),
        gap_p50_ms=_ms(percentile(gaps, 50)),
        gap_p99_ms=_ms(percentile(gaps, 99)),
        gaps=len(gaps),
        client_cpu_s=round(client_cpu_s, 3),
        seconds=round(seconds, 3),
    )


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


def body(tag: str, n: int, tokens: int) -> bytes:
    """A distinct chat request: no cache or coalescing could answer it from another."""
    words = " ".join(_WORDS[(n * k + k) % len(_WORDS)] for k in (3, 7, 11))
    content = f"{tag} {n} {words}"
    return orjson.dumps(
        {
            "model": "m",
            "messages": [{"role": "user", "content": content}],
            "max_tokens": tokens,
            "temperature": 0,
            "stream": True,
        }
    )


# -- the load (I/O) ---------------------------------------------------------------------------


@dataclass
class Load:
    url: str
    streams: int
    seconds: float
    tokens: int
    tag: str
    drain_s: float
    ramp_s: float = 0.0
    records: list[StreamRecord] = field(default_factory=list)
    _numbers: itertools.count[int] = field(default_factory=itertools.count)

    async def run(self) -> None:
        # Idle connections are dropped before uvicorn's 5 s keep-alive closes them: one reused as
        # the server closes it fails (measured: 70% of reuses at 5 s), an error of the client's.
        connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=3)
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=30)
        headers = {"content-type": "application/json", "authorization": f"Bearer {BENCH_KEY}"}
        async with aiohttp.ClientSession(
            connector=connector, timeout=timeout, headers=headers, auto_decompress=False
        ) as session:
            deadline = time.perf_counter() + self.seconds
            workers = [
                asyncio.ensure_future(self._worker(session, deadline, self._offset(i)))
                for i in range(self.streams)
            ]
            _, late = await asyncio.wait(workers, timeout=self.seconds + self.drain_s)
            for worker in late:
                worker.cancel()
            await asyncio.gather(*late, return_exceptions=True)

    def _offset(self, worker: int) -> float:
        return self.ramp_s * worker / self.streams

    async def _worker(self, session: aiohttp.ClientSession, deadline: float, offset: float) -> None:
        await asyncio.sleep(offset)
        while time.perf_counter() < deadline:
            await self._one(session)

    async def _one(self, session: aiohttp.ClientSession) -> None:
        data = body(self.tag, next(self._numbers), self.tokens)
        started = time.perf_counter()
        reader = SSEReader()
        try:
            async with session.post(self.url, data=data) as response:
                if response.status != 200:
                    message = error_message(await response.read())
                    reader.error = f"{response.status} {message}"
                else:
                    await _read(response, reader)
        except asyncio.CancelledError:
            reader.error = reader.error or f"still open after the {self.drain_s:g}s drain"
            self.records.append(record_of(started, reader, self.tokens))
            raise
        except aiohttp.ClientConnectorError as exc:
            reader.error = f"connect: {exc.os_error.strerror or exc.os_error}"
        except aiohttp.ClientError as exc:
            reader.error = f"{type(exc).__name__}"
        self.records.append(record_of(started, reader, self.tokens))


async def _read(response: aiohttp.ClientResponse, reader: SSEReader) -> None:
    content = response.content
    clock = time.perf_counter
    while True:
        data = await content.readany()
        if not data:
            return
        reader.feed(data, clock())


def _raise_open_files() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True, help="the chat completions endpoint")
    parser.add_argument("--streams", type=int, required=True)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--tag", default="streams")
    parser.add_argument("--drain-s", type=float, default=70.0)
    parser.add_argument("--ramp-s", type=float, default=0.0, help="first streams spread over")
    args = parser.parse_args()
    _raise_open_files()
    load = Load(
        args.url, args.streams, args.seconds, args.tokens, args.tag, args.drain_s, args.ramp_s
    )
    began = time.perf_counter()
    try:
        import uvloop

        uvloop.run(load.run())
    except KeyboardInterrupt:
        return 130
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime
    print(summarize(load.records, cpu, time.perf_counter() - began).to_json(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
