"""policies/priority.py, the Priority/Priorities/Overflow.scaled model, decide()'s share and the
[priorities] section of policies/loader.py."""

from __future__ import annotations

import random
from typing import Any

import pytest

from policies.decide import RequestFacts, decide
from policies.load import BackendLoad, LoadSnapshot
from policies.loader import parse_policy
from policies.model import Backend, Overflow, Policy, Priorities, Priority, Route, Tenant
from policies.priority import Chosen, UnknownPriority, predicted_wait, priority_of, urgency
from tests.policy_texts import BACKEND, problems_of

PRIORITIES = Priorities(
    classes=(Priority("interactive"), Priority("standard", 0.75), Priority("batch", 0.5)),
    default="standard",
    aging_s=10.0,
)
BATCH_TENANT = Tenant("nightly", priority="batch")
STANDARD_TENANT = Tenant("acme", priority="standard")


def body_with(priority: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [], "metadata": {"priority": priority}}


# priority_of


def test_the_header_names_the_class() -> None:
    assert priority_of(PRIORITIES, "batch", {}, None) == Chosen(
        "batch", "header X-Overspill-Priority"
    )


@pytest.mark.parametrize("header", ["interactive, batch", "batch,interactive", " batch ,"])
def test_a_header_sent_twice_or_comma_joined_takes_the_least_urgent_class(header: str) -> None:
    assert priority_of(PRIORITIES, header, {}, None).name == "batch"


def test_an_unknown_class_anywhere_in_a_joined_header_is_refused() -> None:
    with pytest.raises(UnknownPriority):
        priority_of(PRIORITIES, "batch, urgent", {}, None)


def test_metadata_priority_names_the_class() -> None:
    assert priority_of(PRIORITIES, None, body_with("interactive"), None) == Chosen(
        "interactive", "metadata.priority"
    )


def test_without_a_request_class_the_tenant_class_applies() -> None:
    assert priority_of(PRIORITIES, None, {}, BATCH_TENANT) == Chosen("batch", "tenant nightly")


def test_without_a_request_or_tenant_class_the_policy_default_applies() -> None:
    assert priority_of(PRIORITIES, None, {}, None) == Chosen("standard", "policy default")


def test_a_tenant_without_a_class_leaves_the_policy_default() -> None:
    assert priority_of(PRIORITIES, None, {}, Tenant("plain")) == Chosen(
        "standard", "policy default"
    )


def test_a_tenant_without_a_class_may_ask_for_any_class() -> None:
    chosen = priority_of(PRIORITIES, "interactive", {}, Tenant("plain"))
    assert chosen == Chosen("interactive", "header X-Overspill-Priority")


def test_a_request_asking_for_a_less_urgent_class_than_its_tenant_gets_it() -> None:
    assert priority_of(PRIORITIES, "batch", {}, STANDARD_TENANT) == Chosen(
        "batch", "header X-Overspill-Priority"
    )
    assert priority_of(PRIORITIES, None, body_with("batch"), STANDARD_TENANT) == Chosen(
        "batch", "metadata.priority"
    )


def test_a_request_asking_for_its_tenant_class_gets_it_from_the_request() -> None:
    assert priority_of(PRIORITIES, "standard", {}, STANDARD_TENANT) == Chosen(
        "standard", "header X-Overspill-Priority"
    )


def test_a_request_asking_for_a_more_urgent_class_than_its_tenant_gets_the_tenant_class() -> None:
    assert priority_of(PRIORITIES, "interactive", {}, BATCH_TENANT) == Chosen(
        "batch", "tenant nightly"
    )
    assert priority_of(PRIORITIES, None, body_with("standard"), BATCH_TENANT) == Chosen(
        "batch", "tenant nightly"
    )


def test_an_unknown_class_in_the_header_is_refused_naming_the_header() -> None:
    with pytest.raises(UnknownPriority) as caught:
        priority_of(PRIORITIES, "urgent", {}, None)
    assert caught.value.source == "header X-Overspill-Priority"
    assert str(caught.value) == (
        "unknown priority 'urgent' in header X-Overspill-Priority "
        "(classes: interactive, standard, batch)"
    )


def test_an_unknown_class_in_metadata_is_refused_naming_metadata() -> None:
    with pytest.raises(UnknownPriority) as caught:
        priority_of(PRIORITIES, None, body_with("urgent"), None)
    assert caught.value.source == "metadata.priority"
    assert "unknown priority 'urgent' in metadata.priority" in str(caught.value)


def test_an_unknown_class_is_refused_even_for_a_tenant_with_a_class() -> None:
    with pytest.raises(UnknownPriority):
        priority_of(PRIORITIES, "Batch", {}, BATCH_TENANT)


def test_an_unknown_priority_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown priority"):
        priority_of(PRIORITIES, "nope", {}, None)


@pytest.mark.parametrize(
    "body",
    [
        body_with(1),
        body_with(None),
        body_with(["batch"]),
        {"metadata": "batch"},
        {"metadata": None},
        {"metadata": ["priority"]},
        {"priority": "batch"},
    ],
    ids=["int", "null", "list", "metadata a string", "metadata null", "metadata a list", "top"],
)
def test_a_non_string_metadata_priority_is_ignored(body: dict[str, Any]) -> None:
    assert priority_of(PRIORITIES, None, body, None) == Chosen("standard", "policy default")


# urgency and predicted_wait


def test_urgency_is_the_rank_when_nothing_was_waited() -> None:
    assert urgency(2, 0.0, 30.0) == 2.0


def test_urgency_falls_by_one_for_every_aging_period_waited() -> None:
    assert urgency(1, 30.0, 30.0) == pytest.approx(0.0)
    assert urgency(1, 15.0, 30.0) == pytest.approx(0.5)
    assert urgency(0, 60.0, 30.0) == pytest.approx(-2.0)


def test_a_batch_request_that_waited_over_an_aging_period_outranks_a_new_interactive_one() -> None:
    assert urgency(1, 31.0, 30.0) < urgency(0, 0.0, 30.0)
    assert urgency(1, 29.0, 30.0) > urgency(0, 0.0, 30.0)


def test_predicted_wait_counts_this_request_too() -> None:
    assert predicted_wait(0, 2.0) == pytest.approx(0.5)
    assert predicted_wait(3, 2.0) == pytest.approx(2.0)
    assert predicted_wait(9, 0.5) == pytest.approx(20.0)


@pytest.mark.parametrize("rate", [None, 0.0])
def test_predicted_wait_is_unknown_without_a_drain_rate(rate: float | None) -> None:
    assert predicted_wait(5, rate) is None


# Overflow.scaled


def test_scaling_by_one_returns_the_same_overflow() -> None:
    overflow = Overflow(max_waiting=8, max_inflight_ratio=1.0)
    assert overflow.scaled(1.0) is overflow


def test_scaling_scales_every_threshold_and_keeps_hysteresis() -> None:
    overflow = Overflow(
        max_waiting=8,
        max_inflight_ratio=1.0,
        max_kv_cache_usage=0.9,
        ttft_slo_s=2.0,
        hysteresis=0.2,
    )
    scaled = overflow.scaled(0.5)  # halving is exact in binary floating point
    assert scaled == Overflow(
        max_waiting=4,
        max_inflight_ratio=0.5,
        max_kv_cache_usage=0.45,
        ttft_slo_s=1.0,
        hysteresis=0.2,
    )
    assert overflow.max_waiting == 8  # the original is untouched


def test_scaled_max_waiting_is_an_integer_rounded_down() -> None:
    scaled = Overflow(max_waiting=5).scaled(0.75)
    assert scaled.max_waiting == 3
    assert isinstance(scaled.max_waiting, int)
    assert Overflow(max_waiting=1).scaled(0.5).max_waiting == 0


def test_scaling_keeps_unset_thresholds_unset() -> None:
    assert Overflow(hysteresis=0.3).scaled(0.5) == Overflow(hysteresis=0.3)
    assert Overflow(max_waiting=4).scaled(0.25) == Overflow(max_waiting=1)


# Priorities


def test_a_class_rank_is_its_position_most_urgent_first() -> None:
    assert [PRIORITIES.rank(name) for name in ("interactive", "standard", "batch")] == [0, 1, 2]


def test_of_returns_the_named_class() -> None:
    assert PRIORITIES.of("batch") == Priority("batch", 0.5)
    assert PRIORITIES.of("interactive").local_share == 1.0


def test_the_default_priorities_have_one_interactive_class() -> None:
    default = Priorities()
    assert default.classes == (Priority("interactive", 1.0, True, 30.0),)
    assert (default.default, default.aging_s) == ("interactive", 30.0)


def test_an_unknown_class_has_no_rank() -> None:
    with pytest.raises(ValueError, match="not in list"):
        PRIORITIES.rank("urgent")


# decide() with a class's share


def two_in_flight(share: float) -> tuple[list[str], frozenset[str], tuple[str, ...]]:
    policy = Policy(
        backends=(Backend("a", "vllm", "http://a:1", max_concurrency=4),),
        routes=(Route("m", overflow=Overflow(max_inflight_ratio=1.0)),),
    )
    snapshot = LoadSnapshot((BackendLoad("a", "vllm", True, {"m": "m"}, in_flight=2),))
    plan = decide(RequestFacts("m", share=share), policy, snapshot, random.Random(0))
    return [t.route for t in plan.targets], plan.saturated, plan.reasons


def test_a_backend_with_room_is_usable_for_a_full_share() -> None:
    routes, saturated, _ = two_in_flight(1.0)
    assert routes == ["local/a"]
    assert saturated == frozenset()


def test_the_same_backend_is_saturated_for_half_a_share() -> None:
    routes, saturated, reasons = two_in_flight(0.5)
    assert routes == ["local/a"]  # no cloud: queued locally as a last resort
    assert saturated == frozenset({"a"})
    assert "saturated: a in-flight/max_concurrency 0.75 > 0.50" in reasons


def test_the_default_share_is_the_full_one() -> None:
    assert RequestFacts("m").share == 1.0


# [priorities] in the policy file


def test_a_full_priorities_section_parses() -> None:
    text = """
[priorities]
default = "standard"
aging_s = 12
classes = [
  { name = "interactive", max_wait_s = 5 },
  { name = "standard", local_share = 0.75, overflow = true, max_wait_s = 20.5 },
  { name = "batch", local_share = 0.5, overflow = false, max_wait_s = 0 },
]

[[tenants]]
name = "nightly"
priority = "batch"
"""
    policy = parse_policy(BACKEND + text, "f.toml", {})
    assert policy.priorities == Priorities(
        classes=(
            Priority("interactive", 1.0, True, 5.0),
            Priority("standard", 0.75, True, 20.5),
            Priority("batch", 0.5, False, 0.0),
        ),
        default="standard",
        aging_s=12.0,
    )
    assert policy.tenants == (Tenant("nightly", priority="batch"),)


def test_without_a_priorities_section_there_is_one_interactive_class() -> None:
    assert parse_policy(BACKEND, "f.toml", {}).priorities == Priorities()


def test_the_default_class_is_the_first_one_when_unset() -> None:
    text = '\n[priorities]\nclasses = [{ name = "urgent" }, { name = "bulk" }]\n'
    priorities = parse_policy(BACKEND + text, "f.toml", {}).priorities
    assert priorities.default == "urgent"
    assert [p.name for p in priorities.classes] == ["urgent", "bulk"]


def test_the_default_may_name_a_class_of_the_default_set() -> None:
    text = '\n[priorities]\ndefault = "interactive"\naging_s = 5\n'
    assert parse_policy(BACKEND + text, "f.toml", {}).priorities == Priorities(aging_s=5.0)


# (text, key path, message); every text has exactly one problem.
INVALID = {
    "unknown default": (
        '\n[priorities]\ndefault = "urgent"\nclasses = [{ name = "a" }, { name = "b" }]\n',
        "priorities.default",
        "unknown class 'urgent' (classes: a, b)",
    ),
    "duplicate class names": (
        '\n[priorities]\nclasses = [{ name = "a" }, { name = "b" }, { name = "a" }]\n',
        "priorities.classes[2].name",
        "duplicate priority class name 'a'",
    ),
    "local_share 0": (
        '\n[priorities]\nclasses = [{ name = "a", local_share = 0 }]\n',
        "priorities.classes[0].local_share",
        "must be in (0, 1], got 0",
    ),
    "local_share 1.5": (
        '\n[priorities]\nclasses = [{ name = "a" }, { name = "b", local_share = 1.5 }]\n',
        "priorities.classes[1].local_share",
        "must be in (0, 1], got 1.5",
    ),
    "negative max_wait_s": (
        '\n[priorities]\nclasses = [{ name = "a", max_wait_s = -1 }]\n',
        "priorities.classes[0].max_wait_s",
        "must not be negative, got -1",
    ),
    "unknown key in a class": (
        '\n[priorities]\nclasses = [{ name = "a", max_wait = 3 }]\n',
        "priorities.classes[0].max_wait",
        "unknown key (expected one of name, local_share, overflow, max_wait_s)",
    ),
    "class without a name": (
        "\n[priorities]\nclasses = [{ local_share = 0.5 }]\n",
        "priorities.classes[0].name",
        "is required (a string)",
    ),
    "overflow not a bool": (
        '\n[priorities]\nclasses = [{ name = "a", overflow = "no" }]\n',
        "priorities.classes[0].overflow",
        "expected true or false, got 'no'",
    ),
    "a non-table entry in classes": (
        '\n[priorities]\nclasses = [{ name = "a" }, "b"]\n',
        "priorities.classes",
        "must be a non-empty array of tables",
    ),
    "empty classes": (
        "\n[priorities]\nclasses = []\n",
        "priorities.classes",
        "must be a non-empty array of tables",
    ),
    "classes not an array": (
        '\n[priorities]\nclasses = "a"\n',
        "priorities.classes",
        "expected an array of {name, ...} tables, got 'a'",
    ),
    "zero aging_s": (
        "\n[priorities]\naging_s = 0\n",
        "priorities.aging_s",
        "must be greater than 0, got 0",
    ),
    "negative aging_s": (
        "\n[priorities]\naging_s = -3.5\n",
        "priorities.aging_s",
        "must be greater than 0, got -3.5",
    ),
    "unknown key in priorities": (
        "\n[priorities]\naging = 3\n",
        "priorities.aging",
        "unknown key (expected one of default, aging_s, classes)",
    ),
    "tenant with an unknown priority": (
        '\n[priorities]\nclasses = [{ name = "fast" }, { name = "slow" }]\n'
        '\n[[tenants]]\nname = "t"\npriority = "urgent"\n',
        "tenants[0].priority",
        "unknown class 'urgent' (classes: fast, slow)",
    ),
    "tenant with a class of the default set missing from the declared ones": (
        '\n[priorities]\nclasses = [{ name = "fast" }]\n'
        '\n[[tenants]]\nname = "t"\npriority = "interactive"\n',
        "tenants[0].priority",
        "unknown class 'interactive' (classes: fast)",
    ),
}


@pytest.mark.parametrize(("text", "key", "message"), INVALID.values(), ids=INVALID.keys())
def test_an_invalid_priorities_section_reports_its_key_path(
    text: str, key: str, message: str
) -> None:
    [problem] = problems_of(BACKEND + text)
    assert (problem.key, problem.message) == (key, message)


def test_a_tenant_priority_without_a_priorities_section_must_be_interactive() -> None:
    [problem] = problems_of(BACKEND + '\n[[tenants]]\nname = "t"\npriority = "batch"\n')
    assert (problem.key, problem.message) == (
        "tenants[0].priority",
        "unknown class 'batch' (classes: interactive)",
    )
    [tenant] = parse_policy(
        BACKEND + '\n[[tenants]]\nname = "t"\npriority = "interactive"\n', "f.toml", {}
    ).tenants
    assert tenant.priority == "interactive"


def test_every_priorities_problem_is_reported_at_once() -> None:
    text = (
        '\n[priorities]\ndefault = "x"\naging_s = 0\n'
        'classes = [{ name = "a", local_share = 2 }, { name = "a", max_wait_s = -1 }]\n'
    )
    assert [p.key for p in problems_of(BACKEND + text)] == [
        "priorities.aging_s",
        "priorities.classes[0].local_share",
        "priorities.classes[1].max_wait_s",
        "priorities.classes[1].name",
        "priorities.default",
    ]


def test_a_priorities_problem_is_reported_on_its_line() -> None:
    text = "\n[priorities]\naging_s = 0\n"  # lines 5-7
    [problem] = problems_of(BACKEND + text)
    assert (problem.key, problem.line) == ("priorities.aging_s", 7)


def test_asked_twice_the_less_urgent_class_wins() -> None:
    """Header and metadata disagreeing: as with a tenant's class, the request gets the less
    urgent one (nobody raises a request's urgency by adding a second claim)."""
    priorities = Priorities((Priority("interactive"), Priority("batch")), "interactive")
    body = {"metadata": {"priority": "interactive"}}
    chosen = priority_of(priorities, "batch", body, None)
    assert chosen == Chosen("batch", "header X-Overspill-Priority")
    chosen = priority_of(priorities, "interactive", {"metadata": {"priority": "batch"}}, None)
    assert chosen == Chosen("batch", "metadata.priority")
