"""Identical requests in flight share one upstream call (single flight, with stream fan-out).

The first request of a key starts a flight: a task of its own that produces the answer's head
(status, headers, route) and then its chunks, recording them. Every request of that key, the
first included, is a passenger that reads the recorded chunks from the start and then follows
the live ones, so a late joiner to a stream gets what was already sent, then the rest. The
flight belongs to no client: the first one leaving does not cut the others off. It is cancelled
(closing the upstream request) only when the last passenger has left before the end.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

Head = TypeVar("Head")
Producer = Callable[[], Awaitable[tuple[Head, AsyncIterator[bytes]]]]


@dataclass
class Flight(Generic[Head]):
    key: str
    head: Head | None = None
    chunks: list[bytes] = field(default_factory=list)
    done: bool = False
    error: BaseException | None = None
    passengers: int = 0
    task: asyncio.Task[None] | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def _notify(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    async def run(self, produce: Producer[Head]) -> None:
        try:
            self.head, chunks = await produce()
            self._notify()
            async with contextlib.aclosing(chunks):  # type: ignore[type-var]
                async for chunk in chunks:
                    self.chunks.append(chunk)
                    self._notify()
        except asyncio.CancelledError:
            self.error = ConnectionAbortedError("every client of this request left")
            raise
        except Exception as error:
            self.error = error
        finally:
            self.done = True
            self._notify()

    async def wait_head(self) -> Head:
        while self.head is None and not self.done:
            await self.changed.wait()
        if self.head is None:
            assert self.error is not None
            raise self.error
        return self.head

    async def follow(self) -> AsyncIterator[bytes]:
        """Every chunk from the first, then the live ones; the flight's error at the end."""
        sent = 0
        while True:
            while sent < len(self.chunks):
                sent += 1
                yield self.chunks[sent - 1]
            if self.done:
                break
            await self.changed.wait()
        if self.error is not None:
            raise self.error


@dataclass
class Coalescer(Generic[Head]):
    flights: dict[str, Flight[Head]] = field(default_factory=dict)
    started: int = 0  # flights, i.e. upstream calls
    joined: int = 0  # passengers who found a flight already under way

    @contextlib.asynccontextmanager
    async def board(self, key: str, produce: Producer[Head]) -> AsyncIterator[Flight[Head]]:
        """Ride the flight of this key, starting it if there is none."""
        flight = self.flights.get(key)
        if flight is None or flight.done:
            flight = self.flights[key] = Flight(key)
            flight.task = asyncio.create_task(self._fly(flight, produce))
            self.started += 1
        else:
            self.joined += 1
        flight.passengers += 1
        try:
            yield flight
        finally:
            flight.passengers -= 1
            if not flight.passengers and not flight.done and flight.task is not None:
                flight.task.cancel()
                # gone at once, not when the task next runs: a request arriving meanwhile
                # must start a flight of its own, not board one that is being torn down
                if self.flights.get(key) is flight:
                    del self.flights[key]

    async def _fly(self, flight: Flight[Head], produce: Producer[Head]) -> None:
        try:
            await flight.run(produce)
        finally:
            if self.flights.get(flight.key) is flight:
                del self.flights[flight.key]
