"""What parsing and the token estimate cost on the event loop (issue 30): a body past
MEASURED_PROMPT_BYTES is estimated from its size, never dumped again; the nesting check
answers as a walk of the whole document would."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy import schema
from proxy.schema import MAX_DEPTH, MEASURED_PROMPT_BYTES, ProxyRequest, parse_request


def _chat(content: str) -> bytes:
    return orjson.dumps({"model": "m", "messages": [{"role": "user", "content": content}]})


def test_a_long_body_is_estimated_from_its_size(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = _chat("a b " * (MEASURED_PROMPT_BYTES // 2))
    request = parse_request("chat", raw)

    def no_dumps(value: Any, option: int = 0) -> bytes:
        raise AssertionError("the prompt was dumped again")

    monkeypatch.setattr(schema, "orjson", SimpleNamespace(dumps=no_dumps))
    assert request.prompt_estimate == len(raw) // 4


def test_a_body_up_to_the_bound_is_measured_as_before() -> None:
    raw = _chat("a b " * (MEASURED_PROMPT_BYTES // 8))
    request = parse_request("chat", raw)
    assert len(raw) <= MEASURED_PROMPT_BYTES
    assert request.prompt_estimate == len(orjson.dumps(request.body)) // 4


def test_everything_the_model_reads_is_estimated() -> None:
    """Tools, schemas and embedding inputs are read and billed too: 16 calls with 40,000 words
    of tools and max_tokens 1 spent 98.6 times a budget that reserved their messages alone."""
    tools = [{"type": "function", "function": {"name": "f", "description": "w " * 2_000}}]
    small = parse_request("chat", _chat("hi"))
    tooled = parse_request("chat", orjson.dumps({**small.body, "tools": tools}))
    assert tooled.prompt_estimate >= small.prompt_estimate + 4_000 // 4
    body = {"model": "m", "input": ["a b "] * MEASURED_PROMPT_BYTES}
    request = ProxyRequest("embeddings", "m", False, body, len(orjson.dumps(body)))
    assert request.prompt_estimate == request.size // 4


def test_every_answer_a_call_makes_is_counted() -> None:
    """A batch of 50 prompts at max_tokens 200 reserved one answer's worth and spent 42 times
    the budget: prompts, n and best_of each multiply the answers."""
    body = {"model": "m", "prompt": ["hi"] * 50, "max_tokens": 200, "n": 2, "best_of": 3}
    request = parse_request("completions", orjson.dumps(body))
    assert request.answers == 50 * 2 * 3
    assert request.answer_estimate == 200 * 300
    ids = parse_request("completions", orjson.dumps({"model": "m", "prompt": [1, 2, 3]}))
    assert ids.answers == 1  # one prompt, as token ids


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


_DOCUMENTS = st.recursive(
    st.one_of(st.none(), st.integers(), st.text(max_size=3)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(), inner)),
    max_leaves=200,
)


@settings(deadline=None, max_examples=300)
@given(document=_DOCUMENTS, wrap=st.integers(0, MAX_DEPTH + 2))
def test_the_nesting_check_finds_what_a_recursive_walk_finds(document: Any, wrap: int) -> None:
    for _ in range(wrap):
        document = [document]
    body = {"model": "m", "x": document}
    assert schema._depth_exceeds(body, MAX_DEPTH) == (_depth(body) > MAX_DEPTH)
