"""Bad input gets an OpenAI-style 4xx naming the problem, never a 5xx; fuzzed bodies too."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.clients import assert_openai_error, json_values
from tests.processes import FAST_ENGINE, Process, sim


@pytest.fixture(scope="module")
def engine() -> Iterator[Process]:
    with sim("--model", "m", "--max-body-bytes", "20000", *FAST_ENGINE) as process:
        yield process


def post(engine: Process, path: str, content: bytes) -> httpx.Response:
    return httpx.post(
        engine.url + path, content=content, headers={"content-type": "application/json"}
    )


CASES: list[tuple[str, bytes, int, str | None]] = [
    ("/v1/chat/completions", b"{not json", 400, None),
    ("/v1/chat/completions", b"[1, 2]", 400, None),
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}]}', 400, "model"),
    ("/v1/chat/completions", b'{"model": "m"}', 400, "messages"),
    ("/v1/chat/completions", b'{"model": "m", "messages": "hi"}', 400, "messages"),
    (
        "/v1/chat/completions",
        b'{"model": "m", "messages": [{"content": "x"}]}',
        400,
        "messages[0].role",
    ),
    ("/v1/chat/completions", b'{"model": 5, "messages": [{"role": "user"}]}', 400, "model"),
    (
        "/v1/chat/completions",
        b'{"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": "ten"}',
        400,
        "max_tokens",
    ),
    (
        "/v1/chat/completions",
        b'{"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 5}',
        400,
        "temperature",
    ),
    (
        "/v1/chat/completions",
        b'{"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": "yes"}',
        400,
        "stream",
    ),
    (
        "/v1/chat/completions",
        b'{"model": "m", "messages": [{"role": "user", "content": "x"}], "n": 3}',
        400,
        "n",
    ),
    (
        "/v1/chat/completions",
        b'{"model": "nope", "messages": [{"role": "user", "content": "x"}]}',
        404,
        "model",
    ),
    ("/v1/completions", b'{"model": "m", "prompt": 42}', 400, "prompt"),
    ("/v1/completions", b'{"model": "m", "prompt": "x", "stop": 3}', 400, "stop"),
    ("/v1/embeddings", b'{"model": "m", "input": 3}', 400, "input"),
]


@pytest.mark.parametrize(("path", "body", "status", "param"), CASES)
def test_bad_body_gets_openai_error(
    engine: Process, path: str, body: bytes, status: int, param: str | None
) -> None:
    assert_openai_error(post(engine, path, body), status, param)


def test_oversized_body_is_413(engine: Process) -> None:
    big = b'{"model": "m", "prompt": "' + b"x" * 30000 + b'"}'
    assert_openai_error(post(engine, "/v1/completions", big), 413)


def test_oversized_chunked_body_is_413(engine: Process) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"model": "m", "prompt": "'
        for _ in range(30):
            yield b"x" * 1000
        yield b'"}'

    response = httpx.post(engine.url + "/v1/completions", content=chunks())
    assert_openai_error(response, 413)


def test_wrong_method_and_unknown_path_are_openai_errors(engine: Process) -> None:
    assert_openai_error(httpx.get(engine.url + "/v1/chat/completions"), 405)
    assert_openai_error(httpx.get(engine.url + "/v2/whatever"), 404)


fields = st.fixed_dictionaries(
    {},
    optional={
        "model": st.sampled_from(["m", "other"]) | json_values,
        "messages": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "role": st.sampled_from(["user", "system"]) | json_values,
                    "content": st.text(max_size=30) | json_values,
                },
            ),
            max_size=3,
        )
        | json_values,
        "prompt": st.text(max_size=30) | json_values,
        "input": st.text(max_size=30) | json_values,
        "max_tokens": st.integers(-5, 40) | json_values,
        "max_completion_tokens": st.integers(-5, 40) | json_values,
        "temperature": st.floats(-1, 3, allow_nan=False) | json_values,
        "seed": st.integers() | json_values,
        "stop": st.text(max_size=5) | json_values,
        "n": st.integers(0, 3) | json_values,
        "stream": st.booleans() | json_values,
        "stream_options": st.fixed_dictionaries({"include_usage": st.booleans()}) | json_values,
        "tools": json_values,
    },
)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    path=st.sampled_from(["/v1/chat/completions", "/v1/completions", "/v1/embeddings"]),
    body=fields,
)
def test_fuzzed_bodies_never_get_a_5xx(engine: Process, path: str, body: dict[str, Any]) -> None:
    response = httpx.post(engine.url + path, json=body, timeout=30)
    assert response.status_code < 500, (body, response.text)
    if response.status_code >= 400:
        assert set(response.json()["error"]) == {"message", "type", "param", "code"}
