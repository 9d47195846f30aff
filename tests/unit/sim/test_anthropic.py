"""Anthropic's Messages API in the simulator, without a server: request parsing, header checks,
the wire format (events, whole messages, errors), stop reasons and the request log."""

from __future__ import annotations

import random
from typing import Any, cast

import orjson
import pytest

from proxy.errors import BadRequest, ModelNotFound, RateLimited, Unauthorized
from proxy.sim.anthropic_api import check_headers, parse_messages
from proxy.sim.anthropic_format import AnthropicFormat, error_body, error_type
from proxy.sim.engine import Engine, Sequence
from proxy.sim.models import ModelHost
from proxy.sim.profile import build_profile
from proxy.sim.recorder import RequestLog
from proxy.sim.simulator import Simulator
from proxy.sim.tokens import OutputPlan, plan_output, render_chat

USER = [{"role": "user", "content": "Hi"}]


def body(**fields: Any) -> dict[str, Any]:
    return {"model": "claude", "max_tokens": 50, "messages": USER, **fields}


def rejected(fields: dict[str, Any]) -> BadRequest:
    with pytest.raises(BadRequest) as caught:
        parse_messages(fields)
    assert caught.value.status == 400
    return caught.value


def events(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    """(event name, data) of each SSE event, checking the name matches the data's type."""
    out = []
    for block in data.decode().split("\n\n"):
        if not block:
            continue
        name_line, data_line = block.split("\n")
        name = name_line.removeprefix("event: ")
        payload = orjson.loads(data_line.removeprefix("data: "))
        assert payload["type"] == name
        out.append((name, payload))
    return out


def finished(tokens: tuple[str, ...], reason: str, stop: str | None = None) -> Sequence:
    seq = Sequence(list(" a b c"), OutputPlan(tokens, reason, stop), arrival=0.0)
    seq.generated, seq.finish_reason, seq.state = len(tokens), reason, "finished"
    return seq


# -- parse_messages ---------------------------------------------------------------------------


def test_system_is_prefilled_before_the_messages() -> None:
    parsed = parse_messages(body(system="Be brief."))
    expected = render_chat([{"role": "system", "content": "Be brief."}, *USER])
    assert parsed.prompt == expected
    assert parsed.model == "claude"
    assert parsed.max_tokens == 50


def test_system_and_content_may_be_text_blocks() -> None:
    blocks = [{"type": "text", "text": "Hi"}]
    parsed = parse_messages(
        body(
            system=[{"type": "text", "text": "Be brief."}],
            messages=[{"role": "user", "content": blocks}],
        )
    )
    assert parsed.prompt == render_chat([{"role": "system", "content": "Be brief."}, *USER])
    assert parsed.echo == "Hi"


def test_max_tokens_caps_rather_than_sets_the_length() -> None:
    parsed = parse_messages(body())
    assert parsed.fills_max_tokens is False
    assert parsed.seed is None  # Anthropic has none
    assert parsed.include_usage is False


def test_stream_stop_sequences_and_temperature_are_read() -> None:
    parsed = parse_messages(body(stream=True, stop_sequences=["\n\n", "END"], temperature=0))
    assert parsed.stream is True
    assert parsed.stop == ("\n\n", "END")
    assert parsed.temperature == 0.0
    assert parse_messages(body()).temperature == 1.0  # Anthropic's default


def test_max_tokens_is_required() -> None:
    fields = body()
    del fields["max_tokens"]
    assert rejected(fields).param == "max_tokens"
    assert rejected(body(max_tokens=0)).param == "max_tokens"
    assert rejected(body(max_tokens=True)).param == "max_tokens"


def test_a_system_role_in_messages_is_refused() -> None:
    error = rejected(body(messages=[{"role": "system", "content": "x"}, *USER]))
    assert error.param == "messages.0.role"
    assert "top-level `system` parameter" in error.message


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"model": ""}, "model"),
        ({"messages": []}, "messages"),
        ({"messages": ["hi"]}, "messages.0"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages.0.role"),
        ({"messages": [{"role": "user", "content": 3}]}, "messages.0.content"),
        ({"messages": [{"role": "user", "content": [{"text": "x"}]}]}, "messages.0.content.0"),
        (
            {"messages": [{"role": "user", "content": [{"type": "text"}]}]},
            "messages.0.content.0.text",
        ),
        ({"system": 5}, "system"),
        ({"stop_sequences": "END"}, "stop_sequences"),
        ({"temperature": 1.5}, "temperature"),  # OpenAI's goes to 2, Anthropic's to 1
        ({"stream": "yes"}, "stream"),
    ],
)
def test_bad_fields_are_named(fields: dict[str, Any], param: str) -> None:
    assert rejected(body(**fields)).param == param


def test_blocks_other_than_text_are_accepted() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": ""}}
    parse_messages(body(messages=[{"role": "user", "content": [image]}]))


# -- check_headers ----------------------------------------------------------------------------


def test_a_key_and_a_version_are_required() -> None:
    check_headers({"x-api-key": "k", "anthropic-version": "2023-06-01"})
    check_headers({"authorization": "Bearer t", "anthropic-version": "2023-06-01"})
    with pytest.raises(Unauthorized):
        check_headers({"anthropic-version": "2023-06-01"})
    with pytest.raises(BadRequest, match="anthropic-version"):
        check_headers({"x-api-key": "k"})


# -- the wire format --------------------------------------------------------------------------


def test_a_stream_is_anthropics_event_sequence() -> None:
    wire = AnthropicFormat("r1", "claude", input_tokens=7)
    seq = finished((" Hello", " there"), "stop")
    data = wire.first() + wire.piece(seq, 0) + wire.piece(seq, 1)
    data += wire.end(seq) + wire.last((seq,))
    got = events(data)
    assert [name for name, _ in got] == [
        "message_start",
        "content_block_start",
        "ping",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    start = got[0][1]["message"]
    assert start["id"] == "msg_r1"
    assert start["role"] == "assistant"
    assert start["model"] == "claude"
    assert start["content"] == []
    assert start["stop_reason"] is None
    assert start["usage"]["input_tokens"] == 7
    assert got[1][1]["content_block"] == {"type": "text", "text": ""}
    assert got[3][1]["delta"] == {"type": "text_delta", "text": " Hello"}
    assert got[3][1]["index"] == 0
    delta = got[6][1]
    assert delta["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}
    assert delta["usage"] == {"output_tokens": 2}


def test_a_whole_message() -> None:
    wire = AnthropicFormat("r2", "claude", input_tokens=3)
    message = orjson.loads(wire.whole((finished((" Hi", "."), "stop"),)))
    assert message == {
        "id": "msg_r2",
        "type": "message",
        "role": "assistant",
        "model": "claude",
        "content": [{"type": "text", "text": " Hi."}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 2},
    }


def test_stop_reasons() -> None:
    wire = AnthropicFormat("r", "claude", input_tokens=1)

    def reason(seq: Sequence) -> tuple[str, str | None]:
        message = orjson.loads(wire.whole((seq,)))
        return message["stop_reason"], message["stop_sequence"]

    assert reason(finished((" a",), "length")) == ("max_tokens", None)
    assert reason(finished((" a",), "stop", "END")) == ("stop_sequence", "END")
    assert reason(finished((" a",), "stop")) == ("end_turn", None)


def test_errors_in_anthropics_shape() -> None:
    assert error_body(404, "no such model") == {
        "type": "error",
        "error": {"type": "not_found_error", "message": "no such model"},
    }
    wire = AnthropicFormat("r", "claude", input_tokens=1)
    whole = orjson.loads(wire.error(RateLimited("slow down", retry_after=1), streaming=False))
    assert whole["error"] == {"type": "rate_limit_error", "message": "slow down"}
    [(name, payload)] = events(wire.error(ModelNotFound("nope"), streaming=True))
    assert name == "error"
    assert payload["error"]["type"] == "not_found_error"


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (403, "permission_error"),
        (413, "request_too_large"),
        (422, "invalid_request_error"),
        (500, "api_error"),
        (502, "api_error"),
        (503, "overloaded_error"),
        (529, "overloaded_error"),
    ],
)
def test_error_types_follow_the_status(status: int, kind: str) -> None:
    assert error_type(status) == kind


# -- what the engine makes of it --------------------------------------------------------------


def simulator(**profile: Any) -> Simulator:
    overrides = {"output_distribution": "fixed", **profile}
    return Simulator(
        personality="cloud",
        profile=build_profile("cloud", overrides=overrides),
        host=cast(ModelHost, None),  # sequence() needs no engine
        clock=lambda: 0.0,
        rng=random.Random(0),
    )


def answer(sim: Simulator, fields: dict[str, Any]) -> OutputPlan:
    seq = sim.sequence(parse_messages(fields), cast(Engine, None), streaming=False)
    return seq.output


def test_an_answer_shorter_than_max_tokens_ends_by_itself() -> None:
    output = answer(simulator(output_tokens=5), body(max_tokens=64000))
    assert len(output.tokens) == 5
    assert output.finish_reason == "stop"


def test_an_answer_longer_than_max_tokens_is_cut() -> None:
    output = answer(simulator(output_tokens=50), body(max_tokens=4))
    assert len(output.tokens) == 4
    assert output.finish_reason == "length"


def test_the_same_request_at_temperature_0_gets_the_same_words() -> None:
    sim = simulator(output_tokens=20)
    assert answer(sim, body(temperature=0)) == answer(sim, body(temperature=0))


def test_a_stop_sequence_is_named() -> None:
    full = plan_output(5, None, 60)
    stop = full.tokens[10].strip()
    cut = plan_output(5, None, 60, stop=["zzz", stop])
    assert cut.stop_sequence == stop
    assert plan_output(5, None, 60, stop=["zzz"]).stop_sequence is None


def test_the_log_keeps_a_fingerprint_of_x_api_key() -> None:
    log = RequestLog()
    headers = {"x-api-key": "sk-ant-secret-9876", "anthropic-version": "2023-06-01"}
    log.record(0.0, "/v1/messages", headers, {})
    kept = log.snapshot()["requests"][0]["headers"]
    assert kept == {"x-api-key": "…9876", "anthropic-version": "2023-06-01"}
