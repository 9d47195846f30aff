"""OpenAI's wire format assembled from finished sequences: one choice per prompt, usage summed,
stream chunks naming their choice (pure: no engine runs)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from proxy.sim.engine import Sequence
from proxy.sim.formats import OpenAIFormat, usage
from proxy.sim.tokens import OutputPlan


def finished(prompt_tokens: int, tokens: tuple[str, ...], reason: str, cached: int = 0) -> Sequence:
    seq = Sequence([" p"] * prompt_tokens, OutputPlan(tokens, reason), arrival=0.0)
    seq.generated, seq.finish_reason, seq.state = len(tokens), reason, "finished"
    seq.cached_tokens = cached
    return seq


def completions(vllm_style: bool = False, include_usage: bool = False) -> OpenAIFormat:
    return OpenAIFormat("r1", "m", chat=False, include_usage=include_usage, vllm_style=vllm_style)


def events(data: bytes) -> list[Any]:
    """The JSON payloads of an SSE body, checking it ends with [DONE]."""
    blocks = [block for block in data.decode().split("\n\n") if block]
    assert blocks[-1] == "data: [DONE]"
    return [orjson.loads(block.removeprefix("data: ")) for block in blocks[:-1]]


BATCH = (
    finished(4, (" a", " b"), "length", cached=0),
    finished(6, (" c",), "stop", cached=2),
    finished(3, (" d", " e"), "length", cached=1),
)


def test_usage_sums_every_prompt_and_every_choice() -> None:
    assert usage(BATCH) == {
        "prompt_tokens": 13,
        "completion_tokens": 5,
        "total_tokens": 18,
        "prompt_tokens_details": {"cached_tokens": 3},
    }


def test_usage_of_one_sequence_is_its_own() -> None:
    assert usage(BATCH[:1]) == {
        "prompt_tokens": 4,
        "completion_tokens": 2,
        "total_tokens": 6,
        "prompt_tokens_details": {"cached_tokens": 0},
    }


def test_a_whole_batch_has_one_choice_per_prompt_in_order() -> None:
    answer = orjson.loads(completions().whole(BATCH))
    assert (answer["id"], answer["object"], answer["model"]) == ("cmpl-r1", "text_completion", "m")
    assert answer["choices"] == [
        {"index": 0, "text": " a b", "logprobs": None, "finish_reason": "length"},
        {"index": 1, "text": " c", "logprobs": None, "finish_reason": "stop"},
        {"index": 2, "text": " d e", "logprobs": None, "finish_reason": "length"},
    ]
    assert answer["usage"] == usage(BATCH)


def test_a_whole_single_answer_keeps_its_exact_bytes() -> None:
    wire = completions()
    expected = (
        b'{"id":"cmpl-r1","object":"text_completion","created":%d,"model":"m","choices":'
        b'[{"index":0,"text":" a b","logprobs":null,"finish_reason":"length"}],"usage":'
        b'{"prompt_tokens":4,"completion_tokens":2,"total_tokens":6,'
        b'"prompt_tokens_details":{"cached_tokens":0}}}' % wire.created
    )
    assert wire.whole(BATCH[:1]) == expected


def test_stream_pieces_name_their_choice() -> None:
    wire = completions()
    chunks = events(wire.piece(" a", index=0) + wire.piece(" c", index=1) + wire.last(BATCH))
    assert [c["choices"][0]["index"] for c in chunks] == [0, 1]
    assert [c["choices"][0]["text"] for c in chunks] == [" a", " c"]


def test_a_hosted_stream_closes_each_choice_with_its_own_chunk() -> None:
    wire = completions(include_usage=True)
    data = b"".join(wire.end(seq, index) for index, seq in enumerate(BATCH)) + wire.last(BATCH)
    chunks = events(data)
    closing = [c["choices"][0] for c in chunks[:-1]]
    assert [(c["index"], c["text"], c["finish_reason"]) for c in closing] == [
        (0, "", "length"),
        (1, "", "stop"),
        (2, "", "length"),
    ]
    assert all(c["usage"] is None for c in chunks[:-1])
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == usage(BATCH)


def test_a_vllm_stream_puts_each_finish_reason_on_that_choices_last_token() -> None:
    wire = completions(vllm_style=True, include_usage=True)
    assert all(wire.end(seq, index) == b"" for index, seq in enumerate(BATCH))
    chunk = events(wire.piece(" c", "stop", index=1) + wire.last(BATCH))[0]
    assert chunk["choices"][0] == {
        "index": 1,
        "logprobs": None,
        "text": " c",
        "finish_reason": "stop",
    }
    assert "usage" not in chunk


@pytest.mark.parametrize("vllm_style", [False, True])
def test_an_aborted_choice_is_closed_with_abort(vllm_style: bool) -> None:
    aborted = finished(2, (" a",), "abort")
    chunk = events(completions(vllm_style).end(aborted, 3) + b"data: [DONE]\n\n")[0]
    assert (chunk["choices"][0]["index"], chunk["choices"][0]["finish_reason"]) == (3, "abort")


def test_without_usage_a_stream_ends_with_done_alone() -> None:
    assert completions().last(BATCH) == b"data: [DONE]\n\n"
