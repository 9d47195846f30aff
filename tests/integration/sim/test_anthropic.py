"""The cloud personality's Anthropic Messages API over a real socket: answers whole and streamed,
errors in Anthropic's shape wherever they arise, every request recorded; other personalities do
not serve it. The events and fields themselves are tests/unit/sim/test_anthropic.py's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.processes import Process, engine_flags, sim

MODEL = "claude-haiku-4-5"
HEADERS = {"x-api-key": "sk-ant-test-4321", "anthropic-version": "2023-06-01"}


def body(**fields: Any) -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 5,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "Hello"}],
        **fields,
    }


@pytest.fixture(scope="module")
def cloud() -> Iterator[Process]:
    flags = engine_flags(personality="cloud", decode_base_ms=1, network_latency_ms=0)
    with sim(*flags, "--model", MODEL, "--max-model-len", "200") as process:
        yield process


def post(cloud: Process, fields: dict[str, Any], **headers: str) -> httpx.Response:
    return httpx.post(cloud.url + "/v1/messages", json=fields, headers={**HEADERS, **headers})


def anthropic_error(response: httpx.Response, status: int, kind: str) -> str:
    """The error's message, once its status and Anthropic shape are checked."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    payload = response.json()
    assert set(payload) == {"type", "error"}
    assert payload["type"] == "error"
    assert payload["error"]["type"] == kind
    message: str = payload["error"]["message"]
    return message


def test_a_whole_message(cloud: Process) -> None:
    answer = post(cloud, body(max_tokens=3))
    assert answer.status_code == 200
    message = answer.json()
    assert message["type"] == "message"
    assert message["model"] == MODEL
    assert message["content"][0]["type"] == "text"
    assert message["content"][0]["text"]
    assert message["usage"]["output_tokens"] <= 3


def test_a_stream_of_named_events(cloud: Process) -> None:
    with httpx.stream(
        "POST", cloud.url + "/v1/messages", json=body(stream=True), headers=HEADERS
    ) as answer:
        assert answer.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in answer.iter_lines() if line.startswith("event: ")]
    names = [line.removeprefix("event: ") for line in lines]
    assert names[:3] == ["message_start", "content_block_start", "ping"]
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(names[3:-3]) == {"content_block_delta"}


def test_every_request_is_recorded_with_a_fingerprint_of_the_key(cloud: Process) -> None:
    httpx.delete(cloud.url + "/_sim/requests")
    post(cloud, body(), **{"x-request-id": "a-1"})
    [entry] = httpx.get(cloud.url + "/_sim/requests").json()["requests"]
    assert entry["path"] == "/v1/messages"
    assert entry["body"]["system"] == "Be brief."
    assert entry["headers"]["x-api-key"] == "…4321"  # never the whole key
    assert entry["headers"]["anthropic-version"] == "2023-06-01"
    assert entry["headers"]["x-request-id"] == "a-1"


def test_errors_come_in_anthropics_shape(cloud: Process) -> None:
    no_key = httpx.post(
        cloud.url + "/v1/messages", json=body(), headers={"anthropic-version": "2023-06-01"}
    )
    assert "x-api-key" in anthropic_error(no_key, 401, "authentication_error")
    no_version = httpx.post(cloud.url + "/v1/messages", json=body(), headers={"x-api-key": "k"})
    assert "anthropic-version" in anthropic_error(no_version, 400, "invalid_request_error")
    fields = body()
    del fields["max_tokens"]
    assert "max_tokens" in anthropic_error(post(cloud, fields), 400, "invalid_request_error")
    assert "nope" in anthropic_error(post(cloud, body(model="nope")), 404, "not_found_error")
    too_long = post(cloud, body(max_tokens=500))  # more than the model's 200 tokens
    anthropic_error(too_long, 400, "invalid_request_error")
    anthropic_error(httpx.get(cloud.url + "/v1/messages"), 405, "invalid_request_error")
    not_json = httpx.post(cloud.url + "/v1/messages", content=b"{", headers=HEADERS)
    anthropic_error(not_json, 400, "invalid_request_error")


def test_injected_faults_come_in_anthropics_shape(cloud: Process) -> None:
    httpx.post(cloud.url + "/_sim/faults", json={"rate_limit_rate": 1.0, "retry_after_s": 3})
    try:
        limited = post(cloud, body())
        anthropic_error(limited, 429, "rate_limit_error")
        assert limited.headers["retry-after"] == "3"
        httpx.post(
            cloud.url + "/_sim/faults",
            json={"rate_limit_rate": 0.0, "error_rate": 1.0, "error_status": 503},
        )
        anthropic_error(post(cloud, body()), 503, "overloaded_error")
    finally:
        httpx.delete(cloud.url + "/_sim/faults")
    assert post(cloud, body()).status_code == 200


def test_only_the_cloud_personality_serves_it() -> None:
    with sim(*engine_flags(decode_base_ms=1), "--model", MODEL) as engine:
        refused = post(engine, body())
        assert refused.status_code == 404
        assert "type" not in refused.json()  # OpenAI's shape: it is not Anthropic's API
        assert refused.json()["error"]["type"] == "not_found"
