from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from proxy.errors import BadRequest
from proxy.schema import decode_json
from proxy.sim.requests import (
    parse_chat,
    parse_completions,
    parse_embeddings,
    parse_keep_alive,
    parse_ollama,
)
from proxy.sim.tokens import ToolCall, render_chat

MESSAGES = [{"role": "user", "content": "Hi"}]


def chat(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "messages": MESSAGES, **fields}


def rejected_param(parse: Callable[[dict[str, Any]], Any], body: dict[str, Any]) -> str | None:
    """The parameter a 400 names when `parse` rejects `body`."""
    with pytest.raises(BadRequest) as caught:
        parse(body)
    assert caught.value.status == 400
    return caught.value.param


# -- decode_json ------------------------------------------------------------------------------


def test_decode_json_returns_the_object() -> None:
    assert decode_json(b'{"model": "m"}') == {"model": "m"}


@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]", b'"text"', b""])
def test_decode_json_rejects_anything_but_a_json_object(raw: bytes) -> None:
    with pytest.raises(BadRequest):
        decode_json(raw)


# -- parse_chat -------------------------------------------------------------------------------


def test_a_minimal_chat_request_gets_the_defaults() -> None:
    request = parse_chat(chat())
    assert request.model == "m"
    assert request.prompt == render_chat(MESSAGES)
    assert (request.max_tokens, request.stop, request.seed) == (None, (), None)
    assert (request.temperature, request.stream, request.include_usage) == (1.0, False, False)
    assert request.keep_alive_s is None


def test_a_full_chat_request_is_parsed() -> None:
    request = parse_chat(
        chat(
            max_tokens=20,
            stop=["\n", "END"],
            seed=7,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
            n=1,
            tools=[{"type": "function", "function": {"name": "lookup"}}],  # not named: no call
        )
    )
    assert request.call is None
    assert (request.max_tokens, request.stop, request.seed) == (20, ("\n", "END"), 7)
    assert (request.temperature, request.stream, request.include_usage) == (0.0, True, True)


def test_max_completion_tokens_is_preferred_over_max_tokens() -> None:
    assert parse_chat(chat(max_tokens=100, max_completion_tokens=5)).max_tokens == 5


def test_max_tokens_is_used_when_max_completion_tokens_is_null() -> None:
    assert parse_chat(chat(max_tokens=9, max_completion_tokens=None)).max_tokens == 9


def test_max_tokens_zero_is_allowed() -> None:
    assert parse_chat(chat(max_tokens=0)).max_tokens == 0


@pytest.mark.parametrize("value", [-1, "5", 2.5, True])
@pytest.mark.parametrize("name", ["max_tokens", "max_completion_tokens"])
def test_an_invalid_max_tokens_is_rejected_naming_it(name: str, value: Any) -> None:
    assert rejected_param(parse_chat, chat(**{name: value})) == name


def test_a_single_stop_string_becomes_a_one_item_tuple() -> None:
    assert parse_chat(chat(stop="###")).stop == ("###",)


@pytest.mark.parametrize("value", [5, ["ok", 5], {"a": 1}])
def test_an_invalid_stop_is_rejected(value: Any) -> None:
    assert rejected_param(parse_chat, chat(stop=value)) == "stop"


@pytest.mark.parametrize("value", [0, 0.7, 2])
def test_temperature_between_zero_and_two_is_accepted(value: float) -> None:
    assert parse_chat(chat(temperature=value)).temperature == value


@pytest.mark.parametrize("value", [-0.1, 2.01, "1", True])
def test_temperature_outside_zero_to_two_is_rejected(value: Any) -> None:
    assert rejected_param(parse_chat, chat(temperature=value)) == "temperature"


@pytest.mark.parametrize("value", [0, 2, 4])
def test_n_other_than_one_is_rejected(value: int) -> None:
    assert rejected_param(parse_chat, chat(n=value)) == "n"


@pytest.mark.parametrize("value", ["true", 1, "yes"])
def test_stream_must_be_a_boolean(value: Any) -> None:
    assert rejected_param(parse_chat, chat(stream=value)) == "stream"


def test_a_null_stream_means_no_streaming() -> None:
    assert parse_chat(chat(stream=None)).stream is False


@pytest.mark.parametrize("value", ["7", 1.5, True])
def test_seed_must_be_an_integer(value: Any) -> None:
    assert rejected_param(parse_chat, chat(seed=value)) == "seed"


def test_stream_options_must_be_an_object() -> None:
    assert rejected_param(parse_chat, chat(stream_options="usage")) == "stream_options"


@pytest.mark.parametrize("body", [{"messages": MESSAGES}, chat(model=""), chat(model=3)])
def test_model_is_required_and_a_non_empty_string(body: dict[str, Any]) -> None:
    assert rejected_param(parse_chat, body) == "model"


@pytest.mark.parametrize("messages", [None, [], "Hi", {"role": "user"}])
def test_messages_must_be_a_non_empty_array(messages: Any) -> None:
    assert rejected_param(parse_chat, chat(messages=messages)) == "messages"


def test_a_message_that_is_not_an_object_is_rejected_by_index() -> None:
    body = chat(messages=[{"role": "user", "content": "a"}, "b"])
    assert rejected_param(parse_chat, body) == "messages[1]"


def test_a_message_without_a_role_is_rejected() -> None:
    assert rejected_param(parse_chat, chat(messages=[{"content": "a"}])) == "messages[0].role"


def test_message_content_must_be_a_string_or_parts() -> None:
    body = chat(messages=[{"role": "user", "content": 42}])
    assert rejected_param(parse_chat, body) == "messages[0].content"


def test_content_parts_and_null_content_are_accepted() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "look"}]},
        {"role": "assistant", "content": None, "tool_calls": []},
    ]
    assert parse_chat(chat(messages=messages)).prompt == render_chat(messages)


def test_a_chat_with_tools_pays_for_them_in_its_prompt_and_may_call_one() -> None:
    tools = [{"type": "function", "function": {"name": "lookup"}}]
    request = parse_chat(chat(tools=tools, tool_choice="required"))
    assert request.prompt == render_chat(MESSAGES, tools)
    assert request.call == ToolCall("lookup", "{}")
    assert parse_chat(chat(tools=tools)).call is None  # auto, and "Hi" names no function


def test_a_bad_tool_is_a_400() -> None:
    assert rejected_param(parse_chat, chat(tools=[{"type": "function"}])) == "tools[0].function"
    assert rejected_param(parse_chat, chat(tool_choice="required")) == "tool_choice"


@pytest.mark.parametrize(
    ("fields", "top"),
    [
        ({}, None),
        ({"logprobs": False}, None),
        ({"logprobs": None, "top_logprobs": None}, None),
        ({"logprobs": True}, 0),
        ({"logprobs": True, "top_logprobs": 5}, 5),
        ({"logprobs": True, "top_logprobs": 20}, 20),
    ],
)
def test_logprobs_and_how_many_alternatives(fields: dict[str, Any], top: int | None) -> None:
    assert parse_chat(chat(**fields)).logprobs == top


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"logprobs": "yes"}, "logprobs"),
        ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
        ({"logprobs": True, "top_logprobs": -1}, "top_logprobs"),
        ({"logprobs": True, "top_logprobs": 2.5}, "top_logprobs"),
        ({"top_logprobs": 2}, "logprobs"),
        ({"logprobs": False, "top_logprobs": 2}, "logprobs"),
    ],
)
def test_bad_logprobs_are_a_400(fields: dict[str, Any], param: str) -> None:
    assert rejected_param(parse_chat, chat(**fields)) == param


def test_a_completions_request_has_no_chat_logprobs() -> None:
    (request,) = parse_completions(completion("p", logprobs=3))
    assert request.logprobs is None


# -- parse_completions ------------------------------------------------------------------------


def completion(prompt: Any, **fields: Any) -> dict[str, Any]:
    return {"model": "m", "prompt": prompt, **fields}


def prompts(body: dict[str, Any]) -> list[str]:
    return [request.prompt for request in parse_completions(body)]


def test_a_completion_prompt_is_used_verbatim_with_sixteen_tokens_by_default() -> None:
    (request,) = parse_completions(completion("Once upon"))
    assert (request.prompt, request.echo, request.max_tokens) == ("Once upon", "Once upon", 16)


def test_a_completion_prompt_in_a_one_item_list_is_one_prompt() -> None:
    assert prompts(completion(["Once"])) == ["Once"]


def test_a_completion_prompt_of_token_ids_is_one_prompt() -> None:
    assert prompts(completion([1, 22, 333])) == ["1 22 333"]


def test_completion_max_tokens_overrides_the_default() -> None:
    assert parse_completions(completion("x", max_tokens=64))[0].max_tokens == 64


def test_an_array_of_strings_is_a_batch_of_prompts_in_order() -> None:
    assert prompts(completion(["a", "b", "", "a"])) == ["a", "b", "", "a"]


def test_an_array_of_token_id_arrays_is_a_batch_of_prompts() -> None:
    assert prompts(completion([[1, 2], [3], [4, 5, 6]])) == ["1 2", "3", "4 5 6"]


def test_a_batch_shares_every_field_but_the_prompt() -> None:
    body = completion(["a", "b"], max_tokens=5, stop=["."], seed=3, stream=True, temperature=0)
    first, second = parse_completions(body)
    assert (first.prompt, first.echo, second.prompt, second.echo) == ("a", "a", "b", "b")
    assert first == dataclasses.replace(second, prompt="a", echo="a")
    assert (first.max_tokens, first.stop, first.seed, first.stream) == (5, (".",), 3, True)


@pytest.mark.parametrize(
    "prompt",
    [
        None,
        5,
        [],  # an empty batch
        [[]],  # an empty prompt of token ids
        [[1], []],
        ["a", [1]],  # mixed: strings and token ids
        [1, "a"],
        [[1], "a"],
        [True],
        [[1, True]],
        [[[1]]],
        [{"text": "a"}],
    ],
)
def test_a_missing_empty_mixed_or_malformed_completion_prompt_is_rejected(prompt: Any) -> None:
    assert rejected_param(parse_completions, completion(prompt)) == "prompt"


def test_the_prompt_is_checked_before_the_other_fields() -> None:
    assert rejected_param(parse_completions, completion([], temperature=3)) == "prompt"


def test_completion_validates_the_shared_fields() -> None:
    assert rejected_param(parse_completions, completion(["x", "y"], temperature=3)) == "temperature"


def test_n_other_than_one_is_still_rejected_for_a_batch() -> None:
    assert rejected_param(parse_completions, completion(["x", "y"], n=2)) == "n"


# -- parse_embeddings -------------------------------------------------------------------------


def test_a_single_embedding_input_becomes_one_item() -> None:
    request = parse_embeddings({"model": "e", "input": "hello"})
    assert (request.model, request.inputs) == ("e", ("hello",))


def test_a_list_of_embedding_inputs_is_kept_in_order() -> None:
    assert parse_embeddings({"model": "e", "input": ["a", "b"]}).inputs == ("a", "b")


def test_embedding_token_ids_become_one_input() -> None:
    assert parse_embeddings({"model": "e", "input": [5, 6]}).inputs == ("5 6",)


@pytest.mark.parametrize("value", [None, [], ["a", 1], 3, [["a"]]])
def test_an_invalid_embedding_input_is_rejected(value: Any) -> None:
    assert rejected_param(parse_embeddings, {"model": "e", "input": value}) == "input"


def test_an_embedding_request_needs_a_model() -> None:
    assert rejected_param(parse_embeddings, {"input": "x"}) == "model"


# -- parse_ollama -----------------------------------------------------------------------------


def ollama_chat(body: dict[str, Any]) -> Any:
    return parse_ollama(body, chat=True)


def ollama_generate(body: dict[str, Any]) -> Any:
    return parse_ollama(body, chat=False)


def test_ollama_chat_streams_by_default_and_has_no_token_limit() -> None:
    request = ollama_chat({"model": "llama3", "messages": MESSAGES})
    assert request.prompt == render_chat(MESSAGES)
    assert (request.stream, request.max_tokens, request.keep_alive_s) == (True, None, None)


def test_ollama_options_map_to_generation_fields() -> None:
    options = {"num_predict": 12, "seed": 3, "temperature": 0.2, "stop": ["\n"]}
    request = ollama_chat({"model": "m", "messages": MESSAGES, "options": options})
    assert (request.max_tokens, request.seed, request.temperature) == (12, 3, 0.2)
    assert request.stop == ("\n",)


@pytest.mark.parametrize("num_predict", [-1, -2])
def test_ollama_negative_num_predict_means_no_limit(num_predict: int) -> None:
    body = {"model": "m", "messages": MESSAGES, "options": {"num_predict": num_predict}}
    assert ollama_chat(body).max_tokens is None


def test_ollama_stream_false_is_honoured() -> None:
    assert ollama_chat({"model": "m", "messages": MESSAGES, "stream": False}).stream is False


def test_ollama_keep_alive_is_parsed() -> None:
    body = {"model": "m", "messages": MESSAGES, "keep_alive": "5m"}
    assert ollama_chat(body).keep_alive_s == 300.0


def test_ollama_generate_renders_system_and_prompt_as_a_chat() -> None:
    request = ollama_generate({"model": "m", "prompt": "Why?", "system": "Be terse."})
    assert request.prompt == render_chat(
        [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Why?"}]
    )


def test_ollama_generate_raw_uses_the_prompt_verbatim() -> None:
    assert ollama_generate({"model": "m", "prompt": "[INST] x", "raw": True}).prompt == "[INST] x"


def test_ollama_generate_without_a_prompt_is_an_empty_user_turn() -> None:
    request = ollama_generate({"model": "m"})
    assert request.prompt == render_chat([{"role": "user", "content": ""}])


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "m", "messages": MESSAGES, "options": "fast"}, "options"),
        ({"model": "m", "messages": "hi"}, "messages"),
        ({"model": "m", "messages": [{"content": "x"}]}, "messages[0].role"),
        (
            {"model": "m", "messages": MESSAGES, "options": {"num_predict": "5"}},
            "options.num_predict",
        ),
        ({"model": "m", "messages": MESSAGES, "options": {"temperature": 9}}, "temperature"),
        ({"model": "m", "messages": MESSAGES, "stream": "no"}, "stream"),
        ({"model": "m", "messages": MESSAGES, "keep_alive": "soon"}, "keep_alive"),
        ({"messages": MESSAGES}, "model"),
    ],
)
def test_ollama_chat_rejects_invalid_fields_naming_them(body: dict[str, Any], param: str) -> None:
    assert rejected_param(ollama_chat, body) == param


def test_ollama_generate_rejects_a_non_string_prompt() -> None:
    assert rejected_param(ollama_generate, {"model": "m", "prompt": ["x"]}) == "prompt"


# -- parse_keep_alive -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (None, None),
        (10, 10.0),
        (2.5, 2.5),
        (-1, -1.0),
        ("30s", 30.0),
        ("5m", 300.0),
        ("1h", 3600.0),
        ("1.5h", 5400.0),
        ("250ms", 0.25),
        ("-1m", -60.0),
    ],
)
def test_keep_alive_durations(value: Any, seconds: float | None) -> None:
    assert parse_keep_alive(value) == seconds


@pytest.mark.parametrize("value", ["soon", "", "5", "m", "5 minutes", True, [5]])
def test_an_invalid_keep_alive_is_rejected(value: Any) -> None:
    with pytest.raises(BadRequest) as caught:
        parse_keep_alive(value)
    assert caught.value.param == "keep_alive"


@pytest.mark.parametrize(("value", "seconds"), [("1h30m", 5400.0), ("5m0s", 300.0), ("0", 0.0)])
def test_keep_alive_accepts_go_duration_strings(value: str, seconds: float) -> None:
    assert parse_keep_alive(value) == seconds
