"""What of a request's body is read off the event loop (issue 30), seen by recording the thread
each piece of work runs in: the privacy scan of a body past a few hundred bytes, with the
prompt's blocks in the same hop; the parse of a body past a few KB; long bodies in a thread of
their own; and a scan given up on (past its timeout) stopping, or never starting."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from starlette.requests import Request

from policies.pii import DETECTORS
from proxy.flow import caller as caller_module
from proxy.flow.affinity import Affinity, prompt_hashes
from proxy.flow.caller import (
    LONG_SCAN_BYTES,
    OFFLOAD_PARSE_BYTES,
    OFFLOAD_SCAN_BYTES,
    Caller,
    Scans,
    read_facts,
    scanned_privacy,
)
from proxy.http import handlers
from proxy.schema import ProxyRequest, parse_request
from tests.unit.proxy.pipeline_harness import POLICY, harness

DETECTING = POLICY + '\n[privacy.detectors]\nemail = "restricted"\nphone = "restricted"\n'
HURRIED = DETECTING.replace("[privacy]", "[privacy]\nscan_timeout_s = 0.05")


def sized(size: int, text: str = "word ") -> ProxyRequest:
    """A chat request whose body is exactly `size` bytes."""
    head, tail = b'{"model":"m","messages":[{"role":"user","content":"', b'"}]}'
    room = size - len(head) - len(tail)
    raw = head + (text.encode() * size)[:room] + tail
    assert len(raw) == size
    return parse_request("chat", raw)


@pytest.fixture
def threads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The thread each run of the email detector is in."""
    seen: list[str] = []
    real = DETECTORS["email"]

    def recording(text: str) -> bool:
        seen.append(threading.current_thread().name)
        return real(text)

    monkeypatch.setitem(DETECTORS, "email", recording)
    return seen


def parts(text: str = DETECTING) -> tuple[Any, Scans]:
    pipeline = harness({"a": [], "b": []}, text).pipeline
    return pipeline.policy, pipeline.runtime.scans


async def test_a_body_of_a_kilobyte_is_scanned_off_the_event_loop(threads: list[str]) -> None:
    """The detectors cost up to about 2 microseconds a byte: 1 KB held the loop 2 ms."""
    policy, scans = parts()
    await scanned_privacy(policy, scans, sized(1024), {}, None)
    await scanned_privacy(policy, scans, sized(OFFLOAD_SCAN_BYTES - 1), {}, None)
    assert threads == ["overspill-scan-short_0", threading.current_thread().name]
    assert scans.started == 1


async def test_a_policy_that_looks_for_nothing_sends_no_body_to_a_thread() -> None:
    policy, scans = parts(POLICY)
    privacy = await scanned_privacy(policy, scans, sized(LONG_SCAN_BYTES), {}, None)
    assert privacy.level == "public"
    assert scans.started == 0


async def test_a_long_body_is_scanned_in_a_thread_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A long scan (seconds, at 4 MB of the costliest text) holds up no short one."""
    release, seen, began = threading.Event(), [], asyncio.Event()
    loop = asyncio.get_running_loop()

    def held_when_long(text: str) -> bool:
        seen.append(threading.current_thread().name)
        if len(text) > LONG_SCAN_BYTES // 2:
            loop.call_soon_threadsafe(began.set)
            release.wait(10)
        return False

    monkeypatch.setitem(DETECTORS, "email", held_when_long)
    policy, scans = parts()
    long = asyncio.create_task(scanned_privacy(policy, scans, sized(LONG_SCAN_BYTES), {}, None))
    try:
        await began.wait()
        await scanned_privacy(policy, scans, sized(2048), {}, None)  # answered meanwhile
        assert not long.done()
    finally:
        release.set()
    await long
    assert seen == ["overspill-scan-long_0", "overspill-scan-short_0"]


def _drained(scans: Scans) -> Iterator[asyncio.Future[None]]:
    """Futures done once every scan queued in either thread so far has ended."""
    for lane in (scans.short, scans.long):
        yield asyncio.wrap_future(lane.submit(lambda: None))


async def test_a_scan_past_its_timeout_stops_at_its_next_detector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    release, ran = threading.Event(), []

    def held(text: str) -> bool:
        ran.append("email")
        release.wait(10)
        return False

    monkeypatch.setitem(DETECTORS, "email", held)
    monkeypatch.setitem(DETECTORS, "phone", lambda text: bool(ran.append("phone")))
    policy, scans = parts(HURRIED)
    first = scanned_privacy(policy, scans, sized(1024), {}, None)
    second = scanned_privacy(policy, scans, sized(1024), {}, None)  # queued behind the first
    late = await asyncio.gather(first, second)
    release.set()
    await asyncio.gather(*_drained(scans))
    assert [privacy.why for privacy in late] == [
        "email: not scanned in time: restricted; phone: not scanned in time: restricted"
    ] * 2
    assert ran == ["email"]  # the first stopped there; the second never began
    assert (scans.timed_out, scans.running) == (2, 0)


async def test_a_scan_whose_request_is_gone_stops_too(monkeypatch: pytest.MonkeyPatch) -> None:
    release, ran, began = threading.Event(), [], asyncio.Event()
    loop = asyncio.get_running_loop()

    def held(text: str) -> bool:
        ran.append("email")
        loop.call_soon_threadsafe(began.set)
        release.wait(10)
        return False

    monkeypatch.setitem(DETECTORS, "email", held)
    monkeypatch.setitem(DETECTORS, "phone", lambda text: bool(ran.append("phone")))
    policy, scans = parts()
    scanning = asyncio.create_task(scanned_privacy(policy, scans, sized(1024), {}, None))
    await began.wait()
    scanning.cancel()  # the client left
    with pytest.raises(asyncio.CancelledError):
        await scanning
    release.set()
    await asyncio.gather(*_drained(scans))
    assert ran == ["email"]


# --- the prompt's blocks, read in the same hop ----------------------------------------------


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The thread each prompt's blocks are hashed in."""
    seen: list[str] = []

    def recording(*args: Any) -> list[bytes]:
        seen.append(threading.current_thread().name)
        return prompt_hashes(*args)

    monkeypatch.setattr(caller_module, "prompt_hashes", recording)
    return seen


async def test_the_prompt_blocks_of_a_long_body_are_read_with_its_scan(hashed: list[str]) -> None:
    policy, scans = parts()
    request, caller = sized(1024), Caller("", None, policy.priorities.of("interactive"))
    facts = await read_facts(policy, scans, request, {}, caller)
    assert hashed == ["overspill-scan-short_0"]
    assert facts.hashes == prompt_hashes(request, policy.balancing, "")
    assert facts.hashes


async def test_blocks_read_off_the_loop_are_matched_without_rendering_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    policy, _ = parts()
    request = sized(1024)
    hashes = prompt_hashes(request, policy.balancing, "")

    def no_render(*args: Any) -> str:
        raise AssertionError("rendered again")

    monkeypatch.setattr("proxy.flow.affinity.render", no_render)
    assert Affinity().prompt(request, policy.balancing, "", hashes).hashes == hashes


async def test_without_detectors_a_body_is_read_off_the_loop_from_a_few_kb(
    hashed: list[str],
) -> None:
    policy, scans = parts(POLICY)
    caller = Caller("", None, policy.priorities.of("interactive"))
    for size in (OFFLOAD_PARSE_BYTES - 1, OFFLOAD_PARSE_BYTES):
        await read_facts(policy, scans, sized(size), {}, caller)
    assert hashed == [threading.current_thread().name, "overspill-scan-short_0"]


# --- the parse ------------------------------------------------------------------------------


def _request(raw: bytes) -> Request:
    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": raw, "more_body": False}

    headers = [(b"content-length", str(len(raw)).encode())]
    return Request({"type": "http", "method": "POST", "headers": headers}, receive)


async def test_a_body_of_a_few_kb_is_parsed_off_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Parsing, the nesting check and the tag check cost up to ~0.25 microseconds a byte."""
    seen: list[str] = []

    def recording(endpoint: Any, raw: bytes) -> ProxyRequest:
        seen.append(threading.current_thread().name)
        return parse_request(endpoint, raw)

    monkeypatch.setattr(handlers, "parse_request", recording)
    services: Any = harness({"a": [], "b": []})
    small, large = (orjson.dumps(sized(n).body) for n in (1024, 4096))
    for raw in (small, large):
        await handlers.read_request(_request(raw), services, "chat")
    assert seen[0] == threading.current_thread().name
    assert seen[1] != threading.current_thread().name
