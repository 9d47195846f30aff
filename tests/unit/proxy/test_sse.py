"""proxy/legs/sse.py: whole events out of chunks cut anywhere, each byte read a bounded number
of times, an event too long to hold dropped."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.legs.sse import EventSplitter

EVENTS = [b'data: {"a": 1}\n\n', b"data: x\n\n", b": keep-alive\n\n", b"data: [DONE]\n\n"]


def fed(splitter: EventSplitter, chunks: list[bytes]) -> list[bytes]:
    return [out for chunk in chunks if (out := splitter.feed(chunk))]


def cut(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points) if b > a]


@given(st.lists(st.sampled_from(EVENTS), max_size=12), st.lists(st.integers(0, 10_000)))
def test_every_byte_comes_out_in_whole_events_however_the_chunks_are_cut(
    events: list[bytes], cuts: list[int]
) -> None:
    data = b"".join(events) + b"data: unfinished"
    splitter = EventSplitter()
    out = fed(splitter, cut(data, cuts))
    assert b"".join(out) + splitter.rest() == data
    assert all(piece.endswith(b"\n\n") for piece in out)


def test_an_event_too_long_to_hold_is_dropped_and_the_next_ones_kept() -> None:
    splitter = EventSplitter(limit=1_000)
    huge = b"data: " + b"x" * 5_000 + b"\n\n"
    chunks = [huge[i : i + 100] for i in range(0, len(huge), 100)]
    out = fed(splitter, [EVENTS[0], *chunks, EVENTS[1]])
    assert b"".join(out) == EVENTS[0] + EVENTS[1]
    assert splitter.dropped > 1_000


async def test_a_cloud_event_too_long_to_hold_ends_the_relay_as_unreadable() -> None:
    """An upstream event of megabytes is no answer: held whole it grows without bound (and was
    searched again at every chunk); the relay stops with the upstream's failure instead."""
    from proxy.errors import UpstreamUnreadable
    from proxy.legs.sse import MAX_EVENT_BYTES
    from proxy.legs.wire_answer import WireAnswer
    from tests.unit.proxy.test_cloud_wire import Scripted
    from tests.unit.proxy.test_wire_billing import TEXT, Bill

    bill = Bill()
    endless = [b"data: " + b"x" * 65_536] * (MAX_EVENT_BYTES // 65_536 + 2)
    answer = WireAnswer(Scripted([*TEXT, *endless]), bill.of(), stream=True)
    relayed: list[bytes] = []

    async def relay() -> None:
        async for chunk in answer.chunks():
            relayed.append(chunk)

    with pytest.raises(UpstreamUnreadable):
        await relay()
    assert b"".join(relayed) == b"".join(TEXT)  # the whole events before it, and no more
    assert len(bill.usd) == 1  # billed once, as a stream that broke
