"""Every bad input and every upstream failure gets an OpenAI-shaped error, never a bare 5xx."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionChunk

from tests.clients import assert_openai_error as check_openai_error
from tests.clients import json_values
from tests.processes import FAST_ENGINE, Process, backend_toml, proxy, running, sim
from tests.waits import wait_until


@pytest.fixture(scope="module")
def engine() -> Iterator[Process]:
    with sim("--model", "m", "--max-model-len", "4096", *FAST_ENGINE) as process:
        yield process


@pytest.fixture(scope="module")
def gateway(engine: Process) -> Iterator[Process]:
    # One attempt and a breaker that never opens: each test sees the engine's error mapped as is
    # (retries and breakers have their own tests).
    config = (
        "[server]\nprobe_interval_s = 0.2\nmax_body_bytes = 20000\n[retry]\nattempts = 1\n"
        "[breaker]\nconsecutive_failures = 1000\nmin_calls = 1000\n"
    )
    with proxy(config + backend_toml("e", "vllm", engine.url)) as p:
        yield p


@pytest.fixture(autouse=True)
def no_faults(engine: Process) -> Iterator[None]:
    yield
    httpx.delete(engine.url + "/_sim/faults")


def assert_openai_error(
    response: httpx.Response, status: int, param: str | None = None
) -> dict[str, Any]:
    error = check_openai_error(response, status, param)
    assert response.headers["x-request-id"]
    return error


def post(gateway: Process, content: bytes, path: str = "/v1/chat/completions") -> httpx.Response:
    headers = {"content-type": "application/json"}
    return httpx.post(gateway.url + path, content=content, headers=headers, timeout=10)


CASES: list[tuple[str, bytes, int, str | None]] = [
    ("/v1/chat/completions", b"{oops", 400, None),
    ("/v1/chat/completions", b'"just a string"', 400, None),
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}]}', 400, "model"),
    ("/v1/chat/completions", b'{"model": "m"}', 400, "messages"),
    ("/v1/chat/completions", b'{"model": "m", "messages": []}', 400, "messages"),
    ("/v1/chat/completions", b'{"model": "m", "messages": [42]}', 400, "messages[0]"),
    (
        "/v1/chat/completions",
        b'{"model": "m", "messages": [{"content": "x"}]}',
        400,
        "messages[0].role",
    ),
    (
        "/v1/chat/completions",
        b'{"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": 1}',
        400,
        "stream",
    ),
    (
        "/v1/chat/completions",
        b'{"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": -1}',
        400,
        "max_tokens",
    ),
    (
        "/v1/chat/completions",
        b'{"model": "nope", "messages": [{"role": "user", "content": "x"}]}',
        404,
        "model",
    ),
    ("/v1/completions", b'{"model": "m"}', 400, "prompt"),
    ("/v1/embeddings", b'{"model": "m"}', 400, "input"),
    ("/v1/embeddings", b'{"model": "m", "input": "x", "stream": true}', 400, "stream"),
]


@pytest.mark.parametrize(("path", "body", "status", "param"), CASES)
def test_bad_input(
    gateway: Process, path: str, body: bytes, status: int, param: str | None
) -> None:
    assert_openai_error(post(gateway, body, path), status, param)


def test_unknown_model_is_model_not_found(gateway: Process) -> None:
    body = b'{"model": "nope", "messages": [{"role": "user", "content": "x"}]}'
    assert assert_openai_error(post(gateway, body), 404)["code"] == "model_not_found"


def test_body_over_the_limit_is_413(gateway: Process) -> None:
    big = b'{"model": "m", "prompt": "' + b"x" * 30000 + b'"}'
    assert_openai_error(post(gateway, big, "/v1/completions"), 413)


def test_unknown_path_and_wrong_method(gateway: Process) -> None:
    assert_openai_error(httpx.get(gateway.url + "/v1/nothing"), 404)
    assert_openai_error(httpx.get(gateway.url + "/v1/chat/completions"), 405)


# What an engine says in its errors is for the operator (issue 30, finding 9): its internals,
# addresses, the operator's organisation or key. The client gets the status, the proxy's words
# naming the target, and of a 4xx the code, param and type when they are short identifiers.
INTERNALS = "org-Q7x9Lm2Kp4Zr at http://10.9.8.7:8000 key sk-engine-key-13579"


def said_to_the_log(gateway: Process, words: str) -> None:
    wait_until(lambda: any(words in line for line in gateway.output), f"{words!r} in the log")


def test_engine_400_tells_the_caller_what_was_wrong_in_the_proxys_words(gateway: Process) -> None:
    body = b'{"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 5000}'
    refused = post(gateway, body)
    error = assert_openai_error(refused, 400)
    assert error["code"] == "context_length_exceeded"
    assert error["message"] == "e answered 400 (context_length_exceeded)"
    said_to_the_log(gateway, "This model's maximum context length is 4096 tokens")


@pytest.mark.parametrize(("engine_status", "proxy_status"), [(500, 502), (503, 503), (502, 502)])
def test_engine_failures_are_mapped(
    gateway: Process, engine: Process, engine_status: int, proxy_status: int
) -> None:
    faults = {"error_rate": 1, "error_status": engine_status, "error_text": INTERNALS}
    httpx.post(engine.url + "/_sim/faults", json=faults)
    body = b'{"model": "m", "messages": [{"role": "user", "content": "x"}]}'
    refused = post(gateway, body)
    error = assert_openai_error(refused, proxy_status)
    assert error["message"].endswith(f"e answered {engine_status}")
    for secret in ("fault injection", "org-Q7x9Lm2Kp4Zr", "10.9.8.7", "sk-engine-key"):
        assert secret not in refused.text
    said_to_the_log(gateway, f"(fault injection) {INTERNALS}")


def test_engine_429_keeps_retry_after(gateway: Process, engine: Process) -> None:
    faults = {"rate_limit_rate": 1, "retry_after_s": 7, "error_text": INTERNALS}
    httpx.post(engine.url + "/_sim/faults", json=faults)
    body = b'{"model": "m", "messages": [{"role": "user", "content": "x"}]}'
    response = post(gateway, body)
    assert assert_openai_error(response, 429)["code"] == "rate_limit_exceeded"
    assert response.headers["retry-after"] == "7"
    assert "org-Q7x9Lm2Kp4Zr" not in response.text


@pytest.mark.parametrize("stream", [False, True])
def test_an_engine_that_compresses_against_the_identity_asked_for_is_a_502(
    gateway: Process, engine: Process, stream: bool
) -> None:
    """Relayed, its bytes would be gzip labelled JSON (issue 30, finding 4): never relayed."""
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": stream}
    httpx.post(engine.url + "/_sim/faults", json={"gzip": "accepted"})
    served = httpx.post(gateway.url + "/v1/chat/completions", json=body, timeout=10)
    assert served.status_code == 200  # asked for identity, it answers plain
    assert served.content.startswith(b"data: {" if stream else b"{")
    httpx.post(engine.url + "/_sim/faults", json={"gzip": "always"})
    refused = httpx.post(gateway.url + "/v1/chat/completions", json=body, timeout=10)
    assert assert_openai_error(refused, 502)["code"] == "upstream_unreadable"


def test_stream_cut_by_the_engine_ends_with_an_sse_error(gateway: Process, engine: Process) -> None:
    httpx.post(engine.url + "/_sim/faults", json={"drop_after_chunks": 3})
    api = openai.OpenAI(base_url=gateway.url + "/v1", api_key="x", max_retries=0)
    stream = api.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "x"}], max_tokens=50, stream=True
    )
    received: list[ChatCompletionChunk] = []
    with pytest.raises(openai.APIError) as caught:
        received.extend(stream)
    # The role chunk, then the three content chunks the engine sent before it dropped.
    assert [bool(c.choices[0].delta.content) for c in received] == [False, True, True, True]
    assert "connection lost mid-stream" in str(caught.value)


def test_engine_hang_hits_the_first_byte_timeout() -> None:
    with sim("--model", "m", "--fault", "hang_s=30") as engine:
        config = "[timeouts]\nfirst_byte_s = 0.5\ntotal_s = 0.5\n" + backend_toml(
            "e", "vllm", engine.url
        )
        with proxy(config) as p:
            body = b'{"model": "m", "messages": [{"role": "user", "content": "x"}]}'
            error = assert_openai_error(post(p, body), 504)
            assert error["code"] == "upstream_timeout"


bodies = st.fixed_dictionaries(
    {},
    optional={
        "model": st.just("m") | json_values,
        "messages": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "role": st.just("user") | json_values,
                    "content": st.text(max_size=20)
                    | json_values
                    # content parts whose type is any JSON value (a list is no key of a set)
                    | st.lists(st.fixed_dictionaries({"type": json_values, "text": st.text()})),
                },
            ),
            max_size=3,
        )
        | json_values,
        "prompt": st.text(max_size=20) | json_values,
        "input": st.text(max_size=20) | json_values,
        "max_tokens": st.integers(-3, 30) | json_values,
        "temperature": st.floats(-1, 3, allow_nan=False) | json_values,
        "stream": st.booleans() | json_values,
        "stop": json_values,
        "n": json_values,
        "tools": json_values,
    },
)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    path=st.sampled_from(["/v1/chat/completions", "/v1/completions", "/v1/embeddings"]),
    body=bodies,
)
def test_fuzzed_bodies_never_get_a_5xx(gateway: Process, path: str, body: dict[str, Any]) -> None:
    response = httpx.post(gateway.url + path, json=body, timeout=30)
    assert response.status_code < 500, (body, response.text)
    if response.status_code >= 400:
        assert set(response.json()["error"]) == {"message", "type", "param", "code"}


# A hostile engine (issue 30, second review, item 7), a real process: what its answers carry
# beyond what the proxy checked never reaches the client.
HOSTILE_ENGINE = r"""
import gzip, json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SECRET = "sk-proj-SECRET org-AcmeCorp internal.db.acme.corp"
SSE = b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n'


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, status, body, headers):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        models = [{"id": m, "object": "model"} for m in ("html", "gzdup", "err")]
        self.send(200, json.dumps({"object": "list", "data": models}).encode(),
                  [("Content-Type", "application/json")])

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        model = body["model"]
        if model == "html":
            page = b"<html><script>alert(1)</script></html>"
            self.send(200, page, [("Content-Type", "text/html")])
        elif model == "gzdup":
            self.send(200, gzip.compress(SSE), [("Content-Type", "text/event-stream"),
                      ("Content-Encoding", "identity"), ("Content-Encoding", "gzip")])
        else:
            error = {"message": "no: " + SECRET, "type": "AcmeCorpInternalSecretOrg",
                     "param": "internal.db.acme.corp", "code": "sk_live_hunter"}
            self.send(429, json.dumps({"error": error}).encode(), [
                ("Content-Type", "application/json"), ("Retry-After", "7; sk-proj-SECRET")])


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
server.serve_forever()
"""


def test_a_hostile_engines_streams_and_error_words_never_reach_the_client(
    tmp_path: Path,
) -> None:
    script = tmp_path / "hostile_engine.py"
    script.write_text(HOSTILE_ENGINE)
    with running([sys.executable, str(script)]) as engine:
        models = {"html": "html", "gzdup": "gzdup", "err": "err"}
        config = "[retry]\nattempts = 1\n" + backend_toml("e", "openai", engine.url, models)
        with proxy(config) as p:
            for model in ("html", "gzdup"):  # a page, or gzip under a second header
                body = {"model": model, "messages": [{"role": "user", "content": "x"}]}
                refused = httpx.post(
                    p.url + "/v1/chat/completions", json={**body, "stream": True}, timeout=10
                )
                assert refused.headers["content-type"] == "application/json"
                assert assert_openai_error(refused, 502)["code"] == "upstream_unreadable"
                assert b"alert" not in refused.content
            body = {"model": "err", "messages": [{"role": "user", "content": "x"}]}
            limited = httpx.post(p.url + "/v1/chat/completions", json=body, timeout=10)
            error = assert_openai_error(limited, 429)
            assert "retry-after" not in limited.headers  # it held more than a number
            assert (error["type"], error["param"], error["code"]) == (
                "upstream_error",
                None,
                "upstream_error",
            )
            for secret in ("SECRET", "Acme", "acme", "hunter"):
                assert secret not in limited.text
