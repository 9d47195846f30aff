from __future__ import annotations

import math

import pytest

from proxy.sim.tokens import (
    ToolCall,
    count_tokens,
    embed,
    message_text,
    natural_length,
    plan_call,
    plan_output,
    render_chat,
    request_seed,
    tokenize,
)


def dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


# -- tokenize ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Hello, world!",
        "  leading and trailing spaces  ",
        "tabs\tand\nnewlines\n\n  mixed",
        "numbers 1234567 and 3.14159",
        "unicode: café, naïve, 東京 🚀",
        "<|im_start|>user\nhi<|im_end|>",
        "",
    ],
)
def test_joining_tokens_gives_the_text_back(text: str) -> None:
    assert "".join(tokenize(text)) == text


def test_words_carry_their_leading_space() -> None:
    assert tokenize("the quick fox") == ["the", " quick", " fox"]


def test_digits_are_grouped_by_three() -> None:
    assert tokenize("1234567") == ["123", "456", "7"]


def test_punctuation_is_one_token_per_character() -> None:
    assert tokenize("hi!?") == ["hi", "!", "?"]


def test_a_special_marker_at_the_start_is_one_token() -> None:
    assert tokenize("<|im_start|>user") == ["<|im_start|>", "user"]


def test_count_tokens_matches_tokenize() -> None:
    text = "The answer, 42, is in 2024's data."
    assert count_tokens(text) == len(tokenize(text)) == 13


@pytest.mark.parametrize("seed", range(25))
def test_generated_output_retokenizes_to_the_same_tokens(seed: int) -> None:
    plan = plan_output(seed, None, 60)
    assert tokenize(plan.text) == list(plan.tokens)


def test_chat_markers_after_a_newline_are_single_tokens() -> None:
    prompt = render_chat([{"role": "system", "content": "a"}, {"role": "user", "content": "b"}])
    assert tokenize(prompt).count("<|im_start|>") == 3


def test_chat_prompt_followed_by_its_output_retokenizes_to_prompt_plus_output_tokens() -> None:
    prompt = render_chat([{"role": "user", "content": "hello"}])
    plan = plan_output(7, None, 20)
    assert tokenize(prompt + plan.text) == tokenize(prompt) + list(plan.tokens)


# -- render_chat ------------------------------------------------------------------------------


def test_render_chat_uses_a_chatml_template_ending_with_the_assistant_turn() -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert render_chat(messages) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_render_chat_defaults_a_missing_role_to_user() -> None:
    assert render_chat([{"content": "x"}]).startswith("<|im_start|>user\nx<|im_end|>")


def test_render_chat_puts_the_tools_first_and_a_tool_call_as_its_tokens() -> None:
    tools = [{"type": "function", "function": {"name": "f"}}]
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call, "not a call"]},
    ]
    assert render_chat(messages, tools) == (
        '<|im_start|>tools\n[{"type":"function","function":{"name":"f"}}]<|im_end|>\n'
        "<|im_start|>user\ngo<|im_end|>\n"
        '<|im_start|>assistant\nf{"a":1}<|im_end|>\n'
        "<|im_start|>assistant\n"
    )


def test_a_called_turn_sent_back_retokenizes_to_what_the_engine_generated() -> None:
    prompt = render_chat([{"role": "user", "content": "go"}])
    plan = plan_call(ToolCall("get_weather", '{"city":"Paris"}'), None)
    assert tokenize(prompt + plan.text) == tokenize(prompt) + list(plan.tokens)


def test_message_text_joins_content_parts() -> None:
    message = {"role": "user", "content": [{"type": "text", "text": "look"}, {"text": "here"}]}
    assert message_text(message) == "look here"


def test_message_text_of_missing_content_is_empty() -> None:
    assert message_text({"role": "assistant", "content": None}) == ""


# -- plan_call --------------------------------------------------------------------------------

CALL = ToolCall("get_weather", '{"city":"Paris"}')


def test_a_call_is_its_names_tokens_then_its_arguments_and_finishes_with_tool_calls() -> None:
    plan = plan_call(CALL, None)
    assert plan.tokens == (
        "get",
        "_",
        "weather",
        "{",
        '"',
        "city",
        '"',
        ":",
        '"',
        "Paris",
        '"',
        "}",
    )
    assert (plan.finish_reason, plan.call, plan.name_tokens) == ("tool_calls", CALL, 3)
    assert plan.call_so_far(len(plan.tokens)) == CALL


def test_max_tokens_only_caps_a_call() -> None:
    assert plan_call(CALL, 100) == plan_call(CALL, None)
    cut = plan_call(CALL, 6)
    assert (cut.finish_reason, len(cut.tokens)) == ("length", 6)
    assert cut.call_so_far(6) == ToolCall("get_weather", '{"city')


def test_a_call_is_made_once_its_name_is_whole() -> None:
    plan = plan_call(CALL, None)
    assert plan.call_so_far(2) is None
    assert plan.call_so_far(3) == ToolCall("get_weather", "")
    assert plan_output(1, 3, 3).call_so_far(3) is None  # a text answer makes no call
    assert plan_output(1, 3, 3).name_tokens == 0


# -- plan_output ------------------------------------------------------------------------------


def test_max_tokens_below_the_natural_length_gives_exactly_max_tokens_and_length() -> None:
    plan = plan_output(seed=3, max_tokens=5, natural_length=50)
    assert len(plan.tokens) == 5
    assert plan.finish_reason == "length"


def test_max_tokens_equal_to_the_natural_length_finishes_with_length() -> None:
    plan = plan_output(seed=3, max_tokens=8, natural_length=8)
    assert (len(plan.tokens), plan.finish_reason) == (8, "length")


def test_max_tokens_above_the_natural_length_still_runs_to_max_tokens() -> None:
    plan = plan_output(seed=3, max_tokens=50, natural_length=7)
    assert len(plan.tokens) == 50
    assert plan.finish_reason == "length"


def test_no_max_tokens_gives_the_natural_length_and_stop() -> None:
    plan = plan_output(seed=3, max_tokens=None, natural_length=12)
    assert (len(plan.tokens), plan.finish_reason) == (12, "stop")


def test_max_tokens_zero_gives_an_empty_answer() -> None:
    plan = plan_output(seed=3, max_tokens=0, natural_length=12)
    assert (plan.tokens, plan.text, plan.finish_reason) == ((), "", "length")


def test_the_same_seed_plans_the_same_answer() -> None:
    assert plan_output(11, None, 40) == plan_output(11, None, 40)


def test_different_seeds_plan_different_answers() -> None:
    assert plan_output(11, None, 40).text != plan_output(12, None, 40).text


def test_a_stop_string_cuts_the_text_just_before_it_and_finishes_with_stop() -> None:
    full = plan_output(5, 40, 100)
    stop = full.tokens[20] + full.tokens[21]
    cut = plan_output(5, 40, 100, stop=[stop])
    assert cut.text == full.text[: full.text.find(stop)]
    assert stop not in cut.text
    assert cut.finish_reason == "stop"


def test_a_stop_string_inside_a_token_keeps_the_part_before_it() -> None:
    full = plan_output(5, None, 30)
    word = full.tokens[10]  # " word": stop on its last two letters
    stop = word[-2:]
    cut = plan_output(5, None, 30, stop=[stop])
    assert cut.text == full.text[: full.text.find(stop)]


def test_the_earliest_of_several_stop_strings_wins() -> None:
    full = plan_output(5, None, 60)
    early, late = full.tokens[30], full.tokens[8]
    cut = plan_output(5, None, 60, stop=[early, late])
    end = min(full.text.find(early), full.text.find(late))
    assert cut.text == full.text[:end]


def test_an_absent_stop_string_changes_nothing() -> None:
    full = plan_output(5, 10, 60)
    assert plan_output(5, 10, 60, stop=["zzz-not-there"]) == full


def test_an_empty_stop_string_is_ignored() -> None:
    full = plan_output(5, 10, 60)
    assert plan_output(5, 10, 60, stop=[""]) == full


# -- request_seed -----------------------------------------------------------------------------


def test_temperature_zero_gives_the_same_seed_every_time() -> None:
    seeds = {request_seed("m", "prompt", None, 0.0) for _ in range(5)}
    assert len(seeds) == 1


def test_an_explicit_seed_gives_the_same_seed_even_when_sampling() -> None:
    assert request_seed("m", "p", 42, 0.9) == request_seed("m", "p", 42, 0.9)


def test_the_seed_depends_on_model_prompt_and_explicit_seed() -> None:
    base = request_seed("m", "p", 1, 0.0)
    assert request_seed("other", "p", 1, 0.0) != base
    assert request_seed("m", "q", 1, 0.0) != base
    assert request_seed("m", "p", 2, 0.0) != base


def test_sampling_without_a_seed_varies_per_call() -> None:
    seeds = {request_seed("m", "prompt", None, 0.7) for _ in range(5)}
    assert len(seeds) == 5


# -- natural_length ---------------------------------------------------------------------------


def test_fixed_distribution_always_gives_the_mean() -> None:
    assert {natural_length(seed, 64, "fixed") for seed in range(50)} == {64}


def test_uniform_distribution_stays_within_half_the_mean_either_side() -> None:
    lengths = [natural_length(seed, 100, "uniform") for seed in range(500)]
    assert min(lengths) >= 50
    assert max(lengths) <= 150
    assert max(lengths) - min(lengths) > 50


def test_uniform_distribution_of_a_tiny_mean_is_never_zero() -> None:
    assert min(natural_length(seed, 1, "uniform") for seed in range(100)) == 1


def test_exponential_distribution_is_positive_with_about_the_mean() -> None:
    lengths = [natural_length(seed, 100, "exponential") for seed in range(2000)]
    assert min(lengths) >= 1
    assert 85 <= sum(lengths) / len(lengths) <= 115


def test_natural_length_is_deterministic_per_seed() -> None:
    assert natural_length(99, 128, "exponential") == natural_length(99, 128, "exponential")


# -- embed ------------------------------------------------------------------------------------


def test_embedding_has_the_requested_dimension_and_unit_norm() -> None:
    vector = embed("a few words about caching", 384)
    assert len(vector) == 384
    assert math.sqrt(dot(vector, vector)) == pytest.approx(1.0)


def test_embedding_of_text_without_words_is_all_zeros() -> None:
    assert embed("   ", 16) == [0.0] * 16


def test_embedding_ignores_case() -> None:
    assert embed("Hello World", 64) == embed("hello world", 64)


def test_similar_texts_are_more_similar_than_unrelated_ones() -> None:
    anchor = embed("the cat sat on the warm mat by the door", 384)
    similar = embed("the cat sat on the mat by the door", 384)
    unrelated = embed("quarterly revenue grew despite supply chain delays", 384)
    assert dot(anchor, similar) > 0.8
    assert dot(anchor, similar) > dot(anchor, unrelated) + 0.5
