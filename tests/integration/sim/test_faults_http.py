"""Every fault mode does what it says, set at run time (POST /_sim/faults) or at start (--fault)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.processes import FAST_ENGINE, Process, sim
from tests.waits import wait_until

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}


@pytest.fixture(scope="module")
def engine() -> Iterator[Process]:
    with sim("--model", "m", "--seed", "1", *FAST_ENGINE) as process:
        yield process


@pytest.fixture(autouse=True)
def no_faults(engine: Process) -> Iterator[None]:
    httpx.delete(engine.url + "/_sim/faults")
    yield
    httpx.delete(engine.url + "/_sim/faults")


def set_faults(engine: Process, **faults: object) -> None:
    response = httpx.post(engine.url + "/_sim/faults", json=faults)
    assert response.status_code == 200, response.text


def chat(engine: Process, **extra: object) -> httpx.Response:
    return httpx.post(engine.url + "/v1/chat/completions", json={**CHAT, **extra}, timeout=10)


@pytest.mark.parametrize("status", [500, 503])
def test_error_rate_one_fails_every_request_with_openai_error(engine: Process, status: int) -> None:
    set_faults(engine, error_rate=1.0, error_status=status)
    response = chat(engine)
    assert response.status_code == status
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert "fault injection" in error["message"]


def test_error_rate_half_fails_about_half(engine: Process) -> None:
    set_faults(engine, error_rate=0.5)
    codes = [chat(engine).status_code for _ in range(60)]
    assert 15 <= codes.count(500) <= 45
    assert codes.count(500) + codes.count(200) == 60


def test_rate_limit_storm_returns_429_with_retry_after(engine: Process) -> None:
    set_faults(engine, rate_limit_rate=1.0, retry_after_s=3)
    response = chat(engine)
    assert response.status_code == 429
    assert response.headers["retry-after"] == "3"
    api = openai.OpenAI(base_url=engine.url + "/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.RateLimitError):
        api.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])


def test_extra_latency_delays_the_first_token(engine: Process) -> None:
    # A lower bound only: the simulator waits at least this long, however fast the machine.
    # (Without the fault a request is quicker, but by how much is this machine's speed.)
    set_faults(engine, extra_latency_ms=300)
    start = time.perf_counter()
    assert chat(engine).status_code == 200
    assert time.perf_counter() - start >= 0.3


def test_hang_before_first_token_until_client_gives_up(engine: Process) -> None:
    set_faults(engine, hang_s=60)
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(engine.url + "/v1/chat/completions", json=CHAT, timeout=0.5)


def read_stream(engine: Process, body: dict[str, object], received: list[str]) -> None:
    """Collect content chunks into `received` until the stream ends (or breaks)."""
    with httpx.stream("POST", engine.url + "/v1/chat/completions", json=body) as response:
        for line in response.iter_lines():
            if '"content":"' in line and '"content":""' not in line:
                received.append(line)


def test_drop_mid_stream_after_n_chunks(engine: Process) -> None:
    set_faults(engine, drop_after_chunks=3)
    received: list[str] = []
    with pytest.raises(httpx.RemoteProtocolError):
        read_stream(engine, {**CHAT, "max_tokens": 20, "stream": True}, received)
    assert len(received) == 3


def test_drop_cuts_a_non_streamed_body(engine: Process) -> None:
    set_faults(engine, drop_after_chunks=0)
    with pytest.raises(httpx.RemoteProtocolError):
        chat(engine)


def listening(engine: Process) -> bool:
    try:
        return httpx.get(engine.url + "/v1/models").status_code == 200
    except httpx.ConnectError:
        return False


def test_listener_stop_and_start(engine: Process) -> None:
    body = {**CHAT, "max_tokens": 8000, "stream": True}  # 16 s at >= 2 ms a step: cut midway
    with httpx.stream("POST", engine.url + "/v1/chat/completions", json=body) as stream:
        lines = stream.iter_lines()
        next(lines)
        set_faults(engine, listener_down_s=1.0)
        with pytest.raises(httpx.RemoteProtocolError):
            for _ in lines:
                pass
    with pytest.raises(httpx.ConnectError):
        httpx.get(engine.url + "/v1/models", timeout=1)
    wait_until(lambda: listening(engine), "the listener is back")
    assert chat(engine).status_code == 200
    assert httpx.get(engine.url + "/_sim/stats").json()["listener_outages"] == 1


def test_bad_fault_is_a_400_naming_the_field(engine: Process) -> None:
    response = httpx.post(engine.url + "/_sim/faults", json={"error_rate": 2})
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "error_rate"
    response = httpx.post(engine.url + "/_sim/faults", json={"explode": True})
    assert response.status_code == 400


def test_faults_set_at_start() -> None:
    with sim("--model", "m", "--fault", "error_rate=1", "--fault", "error_status=503") as p:
        assert httpx.post(p.url + "/v1/chat/completions", json=CHAT).status_code == 503
        assert httpx.get(p.url + "/_sim/faults").json()["error_rate"] == 1
