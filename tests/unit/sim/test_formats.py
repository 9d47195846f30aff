"""OpenAI's wire format assembled from finished sequences: one choice per prompt, usage summed,
stream chunks naming their choice (pure: no engine runs)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from proxy.sim.engine import Sequence
from proxy.sim.formats import OpenAIFormat, usage
from proxy.sim.tokens import OutputPlan, ToolCall, plan_call


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
    chunks = events(wire.piece(BATCH[0], 0, 0) + wire.piece(BATCH[1], 0, 1) + wire.last(BATCH))
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
    chunk = events(wire.piece(BATCH[1], 0, index=1) + wire.last(BATCH))[0]
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


# -- tool calls and logprobs ------------------------------------------------------------------

CALL = ToolCall("get_weather", '{"city":"Paris"}')


def called(limit: int | None = None) -> Sequence:
    plan = plan_call(CALL, limit)
    seq = Sequence([" p"] * 5, plan, arrival=0.0)
    seq.generated, seq.finish_reason, seq.state = len(plan.tokens), plan.finish_reason, "finished"
    return seq


def chat(vllm_style: bool = False, logprobs: int | None = None) -> OpenAIFormat:
    return OpenAIFormat("r1", "m", chat=True, vllm_style=vllm_style, logprobs=logprobs)


def streamed(wire: OpenAIFormat, seq: Sequence) -> list[Any]:
    pieces = b"".join(wire.piece(seq, position) for position in range(seq.generated))
    return events(wire.first() + pieces + wire.end(seq) + wire.last((seq,)))


def test_a_whole_tool_call_is_a_message_with_tool_calls_and_no_content() -> None:
    seq = called()
    (choice,) = orjson.loads(chat().whole((seq,)))["choices"]
    (call,) = choice["message"].pop("tool_calls")
    assert choice == {
        "index": 0,
        "message": {"role": "assistant", "content": None},
        "logprobs": None,
        "finish_reason": "tool_calls",
    }
    assert call["id"].startswith("call_")
    assert len(call["id"]) == len("call_") + 24
    assert {k: v for k, v in call.items() if k != "id"} == {
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
    }
    assert orjson.loads(chat().whole((seq,)))["usage"]["completion_tokens"] == 12


def test_the_same_request_id_gives_the_same_call_id() -> None:
    def call_id(wire: OpenAIFormat) -> str:
        return str(
            orjson.loads(wire.whole((called(),)))["choices"][0]["message"]["tool_calls"][0]["id"]
        )

    assert call_id(chat()) == call_id(chat(vllm_style=True))
    assert call_id(chat()) != call_id(OpenAIFormat("r2", "m", chat=True))


@pytest.mark.parametrize("vllm_style", [False, True])
def test_a_streamed_call_opens_with_its_name_then_sends_its_arguments(vllm_style: bool) -> None:
    chunks = streamed(chat(vllm_style), called())
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert deltas[0] == {"role": "assistant", "content": ""}
    whole = orjson.loads(chat().whole((called(),)))["choices"][0]["message"]["tool_calls"][0]
    assert deltas[1] == {
        "tool_calls": [{"index": 0, **whole, "function": {"name": "get_weather", "arguments": ""}}]
    }
    pieces = [d["tool_calls"][0] for d in deltas[2:] if d]
    assert all(set(p) == {"index", "function"} for p in pieces)
    assert "".join(p["function"]["arguments"] for p in pieces) == '{"city":"Paris"}'
    assert len(pieces) == 9  # one per token of the arguments: the name's went out as one
    finishes = [c["choices"][0]["finish_reason"] for c in chunks]
    assert finishes == [None] * (len(chunks) - 1) + ["tool_calls"]
    if vllm_style:  # on the last token's chunk, as vLLM sends it
        assert deltas[-1] == {"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]}
    else:  # in a closing chunk of its own, as OpenAI sends it
        assert deltas[-1] == {}


@pytest.mark.parametrize("vllm_style", [False, True])
def test_a_call_cut_inside_its_name_makes_no_call(vllm_style: bool) -> None:
    seq = called(limit=2)
    message = orjson.loads(chat(vllm_style).whole((seq,)))["choices"][0]
    assert message["message"] == {"role": "assistant", "content": ""}
    assert message["finish_reason"] == "length"
    chunks = streamed(chat(vllm_style), seq)
    assert [c["choices"][0]["delta"] for c in chunks] == [{"role": "assistant", "content": ""}, {}]
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize("vllm_style", [False, True])
def test_logprobs_are_the_same_whole_and_streamed(vllm_style: bool) -> None:
    seq = finished(3, (" a", " b", "."), "length")
    wire = chat(vllm_style, logprobs=2)
    whole = orjson.loads(wire.whole((seq,)))["choices"][0]["logprobs"]
    assert [entry["token"] for entry in whole["content"]] == [" a", " b", "."]
    assert all(len(entry["top_logprobs"]) == 2 for entry in whole["content"])
    assert ("refusal" in whole) is not vllm_style  # OpenAI says it, vLLM does not
    chunks = streamed(wire, seq)
    sent = [c["choices"][0]["logprobs"] for c in chunks if c["choices"][0]["delta"].get("content")]
    assert [entry for part in sent for entry in part["content"]] == whole["content"]


def test_without_logprobs_asked_none_are_sent() -> None:
    seq = finished(3, (" a",), "length")
    assert orjson.loads(chat().whole((seq,)))["choices"][0]["logprobs"] is None
    assert all(c["choices"][0]["logprobs"] is None for c in streamed(chat(), seq))


def test_a_tool_call_carries_no_logprobs() -> None:
    assert orjson.loads(chat(logprobs=3).whole((called(),)))["choices"][0]["logprobs"] is None
