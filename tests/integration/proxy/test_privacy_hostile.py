"""Privacy against hostile input, through the real proxy: a privacy header sent twice takes the
strictest value, and the scan of a body past a few hundred bytes runs off the event loop, so
other requests are answered meanwhile. Real processes: a simulator behind the proxy, httpx and raw
sockets."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.proxy.test_hostile_clients import config
from tests.policy_texts import EVERY_DETECTOR_RESTRICTED
from tests.processes import FAST_ENGINE, Process, cloud_toml, proxy, sim

CLOUD = ("--personality", "cloud", "--decode-base-ms", "1", "--output-tokens", "4")
GUARDED = (
    """
[[routes]]
model = "m"
cloud = ["mini"]
[privacy]
levels = [{ name = "public" }, { name = "restricted", cloud = "none" }]
"""
    + EVERY_DETECTOR_RESTRICTED
)


@contextlib.contextmanager
def _guarded() -> Iterator[tuple[Process, Process]]:
    """Every detector on, mapped to a level that may not leave; model "m" is served by the
    cloud only (a simulator that records what reaches it)."""
    with contextlib.ExitStack() as stack:
        engine = stack.enter_context(sim(*FAST_ENGINE, "--model", "sim-model"))
        cloud = stack.enter_context(sim(*CLOUD))
        text = config(engine.url, body_timeout_s=60) + cloud_toml("mini", cloud.url) + GUARDED
        yield stack.enter_context(proxy(text)), cloud


@pytest.fixture(scope="module")
def guarded() -> Iterator[tuple[Process, Process]]:
    with _guarded() as processes:
        yield processes


@pytest.fixture
def quiet_guarded() -> Iterator[tuple[Process, Process]]:
    """A guarded proxy of its own: no scan left over from another test's bodies is counted."""
    with _guarded() as processes:
        yield processes


def test_text_beyond_the_scan_limit_never_reaches_the_cloud(
    guarded: tuple[Process, Process],
) -> None:
    p, cloud = guarded
    url = p.url + "/v1/chat/completions"
    sentence = "The quick brown fox jumps over the lazy dog. "
    within = {"model": "m", "messages": [{"role": "user", "content": sentence * 2_000}]}
    assert httpx.post(url, json=within, timeout=60).status_code == 200  # harmless and scanned
    reached = len(httpx.get(cloud.url + "/_sim/requests").json()["requests"])
    beyond = {"model": "m", "messages": [{"role": "user", "content": sentence * 25_000}]}
    refused = httpx.post(url, json=beyond, timeout=60)  # the same prose, 1.1 M characters
    assert refused.status_code == 503
    assert refused.headers["x-overspill-privacy"] == "restricted"
    assert len(httpx.get(cloud.url + "/_sim/requests").json()["requests"]) == reached


@pytest.mark.parametrize(
    ("path", "extra"),
    [
        ("chat", {"prediction": {"type": "content", "content": "SSN 123-45-6789"}}),
        ("chat", {"user": "jane.doe@exemplo.com"}),
        ("chat", {"stop": ["4539 1488 0343 6467"]}),
        (
            "chat",
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {
                        "name": "x",
                        "schema": {"description": "reply to jane.doe@exemplo.com"},
                    },
                }
            },
        ),
        ("completions", {"suffix": "# contact bob@exemplo.com"}),
    ],
    ids=["prediction", "user", "stop", "schema", "suffix"],
)
def test_personal_data_in_any_field_never_reaches_the_cloud(
    guarded: tuple[Process, Process], path: str, extra: dict[str, object]
) -> None:
    p, cloud = guarded
    before = len(httpx.get(cloud.url + "/_sim/requests").json()["requests"])
    shape = (
        {"messages": [{"role": "user", "content": "hello"}]}
        if path == "chat"
        else {"prompt": "def main():"}
    )
    body = {"model": "m", **shape}
    url = p.url + {"chat": "/v1/chat/completions", "completions": "/v1/completions"}[path]
    clean = httpx.post(url, json=body, timeout=60)
    assert clean.status_code == 200  # the same request without the field goes to the cloud
    refused = httpx.post(url, json={**body, **extra}, timeout=60)
    assert refused.status_code == 503
    assert refused.headers["x-overspill-privacy"] == "restricted"
    assert len(httpx.get(cloud.url + "/_sim/requests").json()["requests"]) == before + 1


# --- repeated privacy and priority headers --------------------------------------------------


def test_a_privacy_header_sent_twice_takes_the_strictest() -> None:
    levels = '[privacy]\nlevels = [{ name = "public" }, { name = "restricted", cloud = "none" }]\n'
    with (
        sim(*FAST_ENGINE, "--model", "sim-model") as engine,
        proxy(config(engine.url) + levels) as p,
    ):
        for values in (["public", "restricted"], ["restricted", "public"], ["public, restricted"]):
            headers = [("x-overspill-privacy", v) for v in values]
            body = {
                "model": "sim-model",
                "max_tokens": 2,
                "messages": [{"role": "user", "content": "x"}],
            }
            url = p.url + "/v1/chat/completions"
            response = httpx.post(url, headers=headers, timeout=30, json=body)
            assert response.status_code == 200
            assert response.headers["x-overspill-privacy"] == "restricted"


def _scans(client: httpx.Client, url: str) -> tuple[float, float]:
    """(started, running) privacy scans in worker threads, from /metrics."""
    values = {}
    for family in text_string_to_metric_families(client.get(url + "/metrics").text):
        if family.name.startswith("overspill_privacy_thread_scans"):
            values[family.name] = family.samples[0].value
    return values["overspill_privacy_thread_scans"], values[
        "overspill_privacy_thread_scans_running"
    ]


def test_the_scan_of_a_large_body_does_not_hold_other_requests(
    guarded: tuple[Process, Process],
) -> None:
    """While 4 MB bodies of adversarial text are scanned, /healthz is answered: seen as a scan
    reported running before and after a /healthz answer, with no other scan started between.
    A scan that held the event loop could never be seen running at all."""
    p, _ = guarded
    # digit groups that look almost like phone numbers: the costliest text for the detectors,
    # and 4 MB of it, past the scan cap (what lies beyond counts as detected)
    text = ("+1 23 45 " * 450_000)[: 4_000_000 - 1000]
    raw = orjson.dumps(
        {"model": "sim-model", "max_tokens": 1, "messages": [{"role": "user", "content": text}]}
    )
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json"
        b"\r\ncontent-length: " + str(len(raw)).encode() + b"\r\n\r\n"
    )
    host, port = p.url.removeprefix("http://").split(":")
    with httpx.Client(timeout=120) as client:
        for _ in range(20):  # rounds of big bodies, until one scan is caught running
            conns = [socket.create_connection((host, int(port)), timeout=120) for _ in range(3)]
            for conn in conns:
                conn.sendall(head + raw)
            seen = False
            while not seen and not all(_answered(conn) for conn in conns):
                before = _scans(client, p.url)
                if before[1] < 1:
                    continue
                assert client.get(p.url + "/healthz").status_code == 200
                after = _scans(client, p.url)
                seen = after[1] >= 1 and after[0] == before[0]
            for conn in conns:
                conn.close()
            if seen:
                return
    raise AssertionError("no /healthz was answered while a scan was running")


def test_a_body_of_a_kilobyte_is_scanned_in_a_worker_thread(
    quiet_guarded: tuple[Process, Process],
) -> None:
    """On the costliest text the detectors take about 2 microseconds a byte: a body of a
    kilobyte (which held the event loop 2 ms) is scanned off it, and what it carries still
    keeps it from the cloud."""
    p, cloud = quiet_guarded
    before = len(httpx.get(cloud.url + "/_sim/requests").json()["requests"])
    text = "Please write to jane.doe@exemplo.com. " + "The rest is ordinary prose. " * 34
    body = {"model": "m", "messages": [{"role": "user", "content": text}]}
    with httpx.Client(timeout=60) as client:
        started, _ = _scans(client, p.url)
        refused = client.post(p.url + "/v1/chat/completions", json=body)
        assert 1000 <= len(refused.request.content) < 1100
        assert refused.status_code == 503
        assert refused.headers["x-overspill-privacy"] == "restricted"
        assert _scans(client, p.url)[0] == started + 1
    assert len(httpx.get(cloud.url + "/_sim/requests").json()["requests"]) == before


def _answered(conn: socket.socket) -> bool:
    conn.setblocking(False)
    try:
        return bool(conn.recv(1, socket.MSG_PEEK))
    except BlockingIOError:
        return False
    finally:
        conn.setblocking(True)
