"""The verifier's readings wait in turns by cache scope (cache/turns.py, cache/verifier.py): one
scope's flood of borderline questions delays another scope's reading by at most one reading
per other busy scope, and past QUEUED_PER_SCOPE waiting in one scope its lookups are misses,
unread (issue 30, finding 10)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import numpy as np
import pytest

from cache.judge import Candidate, Judge, ToVerify
from cache.stats import CacheStats
from cache.turns import Turns
from cache.verifier import QUEUED_PER_SCOPE, Crowded, Verifier
from tests.unit.cache.test_verifier import LengthModel, wait_until


def test_scopes_take_turns_and_each_scope_keeps_its_order() -> None:
    turns: Turns[str] = Turns(per_scope=8)
    for item in ("b1", "b2", "b3"):
        assert turns.add("b", item)
    assert turns.add("a", "a1")
    assert turns.add("c", "c1")
    assert turns.add("a", "a2")
    taken = [turns.next() for _ in range(7)]
    assert taken == ["b1", "a1", "c1", "b2", "a2", "b3", None]


def test_a_scope_holds_at_most_its_bound_and_another_is_not_held_to_it() -> None:
    turns: Turns[int] = Turns(per_scope=2)
    assert [turns.add("flood", n) for n in range(4)] == [True, True, False, False]
    assert turns.add("other", 0)
    assert turns.next() == 0
    assert turns.add("flood", 9)  # room again once one was taken
    assert [turns.next() for _ in range(4)] == [0, 1, 9, None]


def test_a_withdrawn_item_is_never_taken_and_an_emptied_scope_loses_its_turn() -> None:
    turns: Turns[str] = Turns(per_scope=8)
    turns.add("a", "a1")
    turns.add("b", "b1")
    turns.withdraw("a", "a1")
    turns.withdraw("a", "never queued")  # nothing to do
    assert turns.next() == "b1"
    assert turns.next() is None
    assert turns.add("a", "a2")
    assert turns.next() == "a2"


class Gated(LengthModel):
    """LengthModel that reads only when the test lets it, and records what it read, in order."""

    def __init__(self) -> None:
        self.read: list[str] = []
        self.permits = threading.Semaphore(0)
        self.reading = threading.Event()

    def scores(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        self.reading.set()
        self.permits.acquire(timeout=10)
        self.read.append(pairs[0][1])  # the question asked
        return super().scores(pairs)


async def loaded(model: Gated) -> Verifier:
    verifier = Verifier(lambda: model)
    verifier.warm()
    await wait_until(lambda: verifier.ready)
    return verifier


async def test_a_flood_in_one_scope_delays_another_scope_by_one_reading_at_most() -> None:
    model = Gated()
    verifier = await loaded(model)
    flood = [asyncio.create_task(verifier.scores(f"flood {n}", ["x"], "b")) for n in range(10)]
    await asyncio.to_thread(model.reading.wait, 10)  # the reader is busy with the first
    await wait_until(lambda: verifier.calls == 10)
    mine = asyncio.create_task(verifier.scores("mine", ["x"], "a"))
    await wait_until(lambda: verifier.calls == 11)
    model.permits.release(11)
    await asyncio.gather(mine, *flood)
    # the reading under way, one of the flood's (its scope's turn came first), then mine
    assert model.read[:3] == ["flood 0", "flood 1", "mine"]
    assert model.read[3:] == [f"flood {n}" for n in range(2, 10)]  # first come, first served


async def test_past_its_bound_a_scope_is_refused_unread_and_another_still_reads() -> None:
    model = Gated()
    verifier = await loaded(model)
    held = asyncio.create_task(verifier.scores("held", ["x"], "b"))
    await asyncio.to_thread(model.reading.wait, 10)
    queued = [
        asyncio.create_task(verifier.scores(f"q {n}", ["x"], "b")) for n in range(QUEUED_PER_SCOPE)
    ]
    await wait_until(lambda: verifier.calls == 1 + QUEUED_PER_SCOPE)
    with pytest.raises(Crowded):
        await verifier.scores("one too many", ["x"], "b")
    other = asyncio.create_task(verifier.scores("other", ["x"], "a"))
    await wait_until(lambda: verifier.calls == 2 + QUEUED_PER_SCOPE)
    model.permits.release(2 + QUEUED_PER_SCOPE)
    await asyncio.gather(held, other, *queued)
    assert "one too many" not in model.read
    assert verifier.crowded == 1


async def test_a_cancelled_reading_leaves_its_scopes_queue_unread() -> None:
    model = Gated()
    verifier = await loaded(model)
    held = asyncio.create_task(verifier.scores("held", ["x"], "b"))
    await asyncio.to_thread(model.reading.wait, 10)
    dropped = asyncio.create_task(verifier.scores("dropped", ["x"], "a"))
    kept = asyncio.create_task(verifier.scores("kept", ["x"], "a"))
    await wait_until(lambda: verifier.calls == 3)
    dropped.cancel()  # the engine answered first
    with pytest.raises(asyncio.CancelledError):
        await dropped
    model.permits.release(2)
    await asyncio.gather(held, kept)
    assert model.read == ["held", "kept"]


class Busy:
    """A verifier whose scope is crowded."""

    ready = True

    def warm(self) -> None:
        pass

    async def scores(self, question: str, stored: Sequence[str], scope: str = "") -> np.ndarray:
        raise Crowded(f"the verifier: {QUEUED_PER_SCOPE} readings already wait in its scope")


async def test_a_lookup_its_scope_has_no_room_to_read_is_a_miss_that_says_why() -> None:
    stats = CacheStats()
    judge = Judge(stats, verifier=Busy())
    reading = ToVerify((Candidate(1, "stored?", 0.9),), {1: None}, "")
    why = await judge.verified(reading, "asked?", lambda ident: True, "scope")
    assert why == f"the verifier: {QUEUED_PER_SCOPE} readings already wait in its scope"
    assert (stats.unverified, stats.verified) == (1, 0)
