"""policies/privacy.py: a request's privacy level is the strictest any source claims."""

from __future__ import annotations

from typing import Any

import pytest

from policies.model import Privacy, PrivacyLevel, Tenant
from policies.pii import SCAN_LIMIT_CHARS
from policies.privacy import (
    Classification,
    UnknownLevel,
    classify,
    header_levels,
    names_redacted,
    request_texts,
)

LEVELS = (
    PrivacyLevel("public"),
    PrivacyLevel("internal", ("azure-eu",)),
    PrivacyLevel("confidential", "none"),
    PrivacyLevel("secret", "none"),
)
DETECTORS = {"email": "internal", "payment_card": "secret", "us_ssn": "confidential"}
POLICY = Privacy(LEVELS, "public", DETECTORS)
HEADER = "header X-Overspill-Privacy"
CARD = "my card is 4539 1488 0343 6467"


def chat(*texts: str, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "llama",
        "messages": [{"role": "user", "content": text} for text in texts],
    }
    if metadata is not None:
        body["metadata"] = metadata
    return body


def level_of(
    body: dict[str, Any],
    *,
    header: str | list[str] | None = None,
    tenant: Tenant | None = None,
    privacy: Privacy = POLICY,
) -> str:
    return classify(privacy, header=header, body=body, tenant=tenant).level


def test_a_plain_request_gets_the_policy_default() -> None:
    result = classify(POLICY, header=None, body=chat("hello"), tenant=None)
    assert result == Classification("public", ("policy default: public",))


def test_a_strict_policy_default_applies_to_a_plain_request() -> None:
    strict = Privacy(LEVELS, "confidential", DETECTORS)
    assert level_of(chat("hello"), privacy=strict) == "confidential"


def test_the_header_raises_the_level() -> None:
    result = classify(POLICY, header="confidential", body=chat("hello"), tenant=None)
    assert result == Classification("confidential", (f"{HEADER}: confidential",))


def test_metadata_privacy_raises_the_level() -> None:
    body = chat("hello", metadata={"privacy": "internal"})
    result = classify(POLICY, header=None, body=body, tenant=None)
    assert result == Classification("internal", ("metadata.privacy: internal",))


def test_a_level_named_by_the_caller_alone_detects_nothing() -> None:
    result = classify(POLICY, header="secret", body=chat("hi"), tenant=None)
    assert not result.detected


def test_the_tenant_default_raises_the_level() -> None:
    result = classify(POLICY, header=None, body=chat("hi"), tenant=Tenant("acme", "secret"))
    assert result == Classification("secret", ("tenant acme: secret",))


def test_a_tenant_without_a_level_changes_nothing() -> None:
    assert level_of(chat("hi"), tenant=Tenant("guest")) == "public"


def test_a_detector_raises_the_level_to_the_one_it_maps_to() -> None:
    result = classify(POLICY, header=None, body=chat(CARD), tenant=None)
    assert result == Classification(
        "secret", ("detected payment_card in messages[0].content: secret",), detected=True
    )


def test_the_strictest_of_all_sources_wins() -> None:
    body = chat("write to jane@exemplo.com", metadata={"privacy": "confidential"})
    result = classify(POLICY, header="internal", body=body, tenant=Tenant("acme", "internal"))
    # the e-mail address was found, though a stricter claim names the level
    assert result == Classification(
        "confidential", ("metadata.privacy: confidential",), detected=True
    )


def test_a_public_header_does_not_lower_a_detected_card() -> None:
    result = classify(POLICY, header="public", body=chat(CARD), tenant=None)
    assert result.level == "secret"
    assert result.reasons == ("detected payment_card in messages[0].content: secret",)


def test_public_metadata_does_not_lower_the_tenant_level() -> None:
    body = chat("hi", metadata={"privacy": "public"})
    assert level_of(body, tenant=Tenant("acme", "confidential")) == "confidential"


def test_a_public_header_does_not_lower_a_strict_policy_default() -> None:
    strict = Privacy(LEVELS, "internal", DETECTORS)
    assert level_of(chat("hi"), header="public", privacy=strict) == "internal"


def test_a_detector_mapping_to_a_lower_level_does_not_lower_the_header() -> None:
    assert level_of(chat("jane@exemplo.com"), header="secret") == "secret"


def test_reasons_list_every_source_that_set_the_final_level_in_order() -> None:
    privacy = Privacy(LEVELS, "internal", DETECTORS)
    body = chat("mail jane@exemplo.com", metadata={"privacy": "internal"})
    result = classify(privacy, header="internal", body=body, tenant=Tenant("acme", "internal"))
    assert result.level == "internal"
    assert result.reasons == (
        "policy default: internal",
        f"{HEADER}: internal",
        "metadata.privacy: internal",
        "tenant acme: internal",
        "detected email in messages[0].content: internal",
    )


def test_reasons_leave_out_sources_that_claimed_a_lower_level() -> None:
    body = chat(f"{CARD}, SSN 123-45-6789", metadata={"privacy": "secret"})
    result = classify(POLICY, header="internal", body=body, tenant=None)
    assert result.reasons == (
        "metadata.privacy: secret",
        "detected payment_card in messages[0].content: secret",
    )


def test_why_joins_the_reasons() -> None:
    result = classify(POLICY, header="secret", body=chat(CARD), tenant=None)
    assert result.why == f"{HEADER}: secret; detected payment_card in messages[0].content: secret"


def test_an_unknown_header_level_is_refused_naming_the_header() -> None:
    with pytest.raises(UnknownLevel) as caught:
        classify(POLICY, header="top-secret", body=chat("hi"), tenant=None)
    assert caught.value.source == HEADER
    assert str(caught.value) == (
        "unknown privacy level 'top-secret' in header X-Overspill-Privacy "
        "(levels: public, internal, confidential, secret)"
    )


def test_an_unknown_metadata_level_is_refused_naming_metadata() -> None:
    with pytest.raises(UnknownLevel) as caught:
        classify(POLICY, header=None, body=chat("hi", metadata={"privacy": "vip"}), tenant=None)
    assert caught.value.source == "metadata.privacy"
    assert "'vip' in metadata.privacy" in str(caught.value)


def test_level_names_are_case_sensitive() -> None:
    with pytest.raises(UnknownLevel):
        classify(POLICY, header="Secret", body=chat("hi"), tenant=None)


def test_unknown_level_is_a_value_error() -> None:
    assert issubclass(UnknownLevel, ValueError)


def test_metadata_without_privacy_changes_nothing() -> None:
    assert level_of(chat("hi", metadata={"user": "jane"})) == "public"


def test_a_detector_not_enabled_in_the_policy_does_not_fire() -> None:
    only_cards = Privacy(LEVELS, "public", {"payment_card": "secret"})
    result = classify(only_cards, header=None, body=chat("jane@exemplo.com"), tenant=None)
    assert result == Classification("public", ("policy default: public",))


def test_with_no_detectors_enabled_personal_data_changes_nothing() -> None:
    bare = Privacy(LEVELS, "public", {})
    assert level_of(chat(CARD, "123-45-6789"), privacy=bare) == "public"


def test_personal_data_in_a_tool_call_raises_the_level() -> None:
    body = {
        "messages": [
            {"role": "user", "content": "charge it"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "charge", "arguments": '{"card": "4539148803436467"}'},
                    }
                ],
            },
        ]
    }
    assert level_of(body) == "secret"


def test_personal_data_in_an_embeddings_input_list_raises_the_level() -> None:
    assert level_of({"model": "e", "input": ["fine", "SSN 123-45-6789"]}) == "confidential"


def test_personal_data_in_a_completion_prompt_raises_the_level() -> None:
    assert level_of({"model": "m", "prompt": "reply to jane@exemplo.com"}) == "internal"


def test_request_texts_reads_string_message_contents() -> None:
    body = {
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "what is 2+2?"},
        ]
    }
    texts = request_texts(body)
    assert "be brief" in texts
    assert "what is 2+2?" in texts


def test_request_texts_reads_content_part_lists() -> None:
    body = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "first part"},
                    {"type": "text", "text": "second part"},
                ],
            }
        ]
    }
    texts = request_texts(body)
    assert "first part" in texts
    assert "second part" in texts


def test_request_texts_reads_tool_call_arguments_and_tool_results() -> None:
    arguments = '{"city": "Paris"}'
    body = {
        "messages": [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_9",
                        "type": "function",
                        "function": {"name": "weather", "arguments": arguments},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_9", "content": "sunny, 21C"},
        ]
    }
    texts = request_texts(body)
    assert arguments in texts
    assert "sunny, 21C" in texts


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"prompt": "once upon a time"}, ["prompt", "once upon a time"]),
        ({"prompt": ["first prompt", "second"]}, ["prompt", "first prompt", "second"]),
        ({"input": "embed me"}, ["input", "embed me"]),
        ({"input": ["one", "two", "three"]}, ["input", "one", "two", "three"]),
    ],
    ids=["prompt string", "prompt list", "input string", "input list"],
)
def test_request_texts_reads_prompts_and_embedding_inputs(
    body: dict[str, Any], expected: list[str]
) -> None:
    assert request_texts({"model": "m", **body}) == expected


def test_request_texts_skips_token_ids_numbers_and_the_model_name() -> None:
    body = {
        "model": "jane@exemplo.com",
        "prompt": [[1, 2, 3], [4, 5]],
        "max_tokens": 5,
        "temperature": 0.2,
    }
    assert request_texts(body) == ["prompt", "max_tokens", "temperature"]


@pytest.mark.parametrize(
    "field",
    [
        {"user": "jane@exemplo.com"},
        {"metadata": {"note": "jane@exemplo.com"}},
        {"prediction": {"type": "content", "content": "jane@exemplo.com"}},
        {"suffix": "# contact jane@exemplo.com"},
        {"stop": ["jane@exemplo.com"]},
        {
            "tools": [
                {
                    "type": "function",
                    "function": {"name": "f", "description": "mail jane@exemplo.com"},
                }
            ]
        },
        {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"schema": {"properties": {"jane@exemplo.com": {"type": "string"}}}},
            }
        },
        {"a_field_no_api_has_yet": {"deep": ["jane@exemplo.com"]}},
    ],
    ids=["user", "metadata", "prediction", "suffix", "stop", "tools", "schema key", "unknown"],
)
def test_personal_data_in_any_field_raises_the_level(field: dict[str, Any]) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hello"}], **field}
    assert level_of(body) == "internal"


def test_request_texts_of_an_empty_body_is_empty() -> None:
    assert request_texts({}) == []


# --- a header sent more than once, or listing levels: each level named is a claim ------------


@pytest.mark.parametrize(
    "header",
    [["public", "secret"], ["secret", "public"], "public, secret", ["public", "internal,secret"]],
    ids=["two values", "strict one first", "comma-joined", "both"],
)
def test_the_strictest_level_the_header_names_wins(header: str | list[str]) -> None:
    result = classify(POLICY, header=header, body=chat("hello"), tenant=None)
    assert result == Classification("secret", (f"{HEADER}: secret",))


def test_a_gateways_appended_level_is_not_undone_by_the_clients_own() -> None:
    assert level_of(chat("hi"), header=["public", "confidential"]) == "confidential"


def test_a_level_named_twice_is_one_reason() -> None:
    result = classify(
        POLICY, header=["internal", "internal, internal"], body=chat("hi"), tenant=None
    )
    assert result == Classification("internal", (f"{HEADER}: internal",))


def test_an_unknown_level_in_second_position_is_refused() -> None:
    with pytest.raises(UnknownLevel) as caught:
        classify(POLICY, header=["public", "top-secret"], body=chat("hi"), tenant=None)
    assert caught.value.source == HEADER
    assert "'top-secret' in header X-Overspill-Privacy" in str(caught.value)


def test_an_unknown_level_after_a_comma_is_refused() -> None:
    with pytest.raises(UnknownLevel):
        classify(POLICY, header="secret, vip", body=chat("hi"), tenant=None)


@pytest.mark.parametrize("header", [[], "", " , ", ["", " "]], ids=repr)
def test_a_header_naming_no_level_changes_nothing(header: str | list[str]) -> None:
    result = classify(POLICY, header=header, body=chat("hi"), tenant=None)
    assert result == Classification("public", ("policy default: public",))


@pytest.mark.parametrize(
    ("header", "levels"),
    [
        (None, []),
        ("secret", ["secret"]),
        (" secret ", ["secret"]),
        ("public,secret", ["public", "secret"]),
        (["public", " internal , secret ", ""], ["public", "internal", "secret"]),
        (("secret", "public", "secret"), ["secret", "public"]),
        ("a,,b,", ["a", "b"]),
    ],
)
def test_header_levels_splits_strips_and_drops_repeats(
    header: str | list[str] | tuple[str, ...] | None, levels: list[str]
) -> None:
    assert header_levels(header) == levels


# --- text past the detectors' scan limit ------------------------------------------------------

BEYOND = f"text beyond the scan limit ({SCAN_LIMIT_CHARS} characters)"


def prompts(*texts: str) -> dict[str, Any]:
    return {"model": "m", "prompt": list(texts)}  # texts to scan: exactly these


def test_a_request_past_the_scan_limit_is_claimed_by_every_enabled_detector() -> None:
    body = prompts("a" * SCAN_LIMIT_CHARS, "b")
    result = classify(POLICY, header=None, body=body, tenant=None)
    assert result == Classification("secret", (f"payment_card: {BEYOND}: secret",), True)


def test_past_the_limit_each_detector_gives_its_own_reason() -> None:
    policy = Privacy(LEVELS, "public", {"email": "internal", "us_ssn": "internal"})
    body = prompts("mail jane@exemplo.com", "x" * SCAN_LIMIT_CHARS)
    result = classify(policy, header=None, body=body, tenant=None)
    assert result == Classification(
        "internal",
        ("detected email in prompt[0]: internal", f"us_ssn: {BEYOND}: internal"),
        detected=True,
    )


def test_a_request_up_to_the_scan_limit_gets_only_what_is_detected() -> None:
    # the field's name counts too: "prompt", 6 characters
    body = prompts("mail jane@exemplo.com", "x" * (SCAN_LIMIT_CHARS - 21 - 6))
    result = classify(POLICY, header=None, body=body, tenant=None)
    assert result == Classification(
        "internal", ("detected email in prompt[0]: internal",), detected=True
    )


def test_past_the_limit_with_no_detectors_enabled_changes_nothing() -> None:
    bare = Privacy(LEVELS, "public", {})
    assert level_of(prompts("a" * (SCAN_LIMIT_CHARS + 1)), privacy=bare) == "public"


def test_names_are_read_thoroughly_where_a_name_only_sends_a_request_redacted() -> None:
    redacting = (PrivacyLevel("public"), PrivacyLevel("personal", redact=True))
    kept = (*redacting, PrivacyLevel("restricted", "none"))
    assert names_redacted(Privacy(redacting, "public", {"person": "personal"}))
    assert not names_redacted(Privacy(kept, "public", {"person": "restricted"}))
    assert not names_redacted(Privacy(kept, "public", {"email": "personal"}))
