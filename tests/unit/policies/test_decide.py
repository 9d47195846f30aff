"""policies/decide.py and policies/load.py: which backends to try, in which order, and why."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping

import pytest

from policies.decide import RequestFacts, RoutingPlan, Target, decide
from policies.load import BackendLoad, LoadSnapshot
from policies.model import Backend, BackendKind, Balancing, CloudTarget, Overflow, Policy, Route


def decide_for(model: str, snapshot: LoadSnapshot, rng: random.Random) -> RoutingPlan:
    """decide() for a policy that declares exactly the snapshot's backends, no routes or clouds."""
    backends = tuple(Backend(b.name, b.kind, f"http://{b.name}:1") for b in snapshot.backends)
    return decide(RequestFacts(model), Policy(backends=backends), snapshot, rng)


def load(
    name: str,
    *,
    kind: BackendKind = "vllm",
    healthy: bool = True,
    models: Mapping[str, str] | None = None,
    in_flight: int = 0,
    waiting: int | None = None,
    loaded: set[str] | None = None,
    error: str | None = None,
) -> BackendLoad:
    return BackendLoad(
        name=name,
        kind=kind,
        healthy=healthy,
        models={"m": "m"} if models is None else models,
        in_flight=in_flight,
        waiting=waiting,
        loaded_models=None if loaded is None else frozenset(loaded),
        error=error,
    )


def order(*backends: BackendLoad, model: str = "m", seed: int = 0) -> list[str]:
    plan = decide_for(model, LoadSnapshot(backends), random.Random(seed))
    return [target.name for target in plan.targets]


def test_unhealthy_backend_is_skipped_with_its_error_as_reason() -> None:
    plan = decide_for(
        "m",
        LoadSnapshot((load("down", healthy=False, error="connection refused"), load("up"))),
        random.Random(0),
    )
    assert [t.name for t in plan.targets] == ["up"]
    assert "unhealthy: down (connection refused)" in plan.reasons


def test_unhealthy_backend_without_an_error_is_not_answering() -> None:
    plan = decide_for("m", LoadSnapshot((load("down", healthy=False),)), random.Random(0))
    assert plan.targets == ()
    assert plan.reasons == ("unhealthy: down (not answering)",)


def test_least_outstanding_backend_goes_first() -> None:
    busy = load("busy", in_flight=3)
    quiet = load("quiet", in_flight=1)
    idle = load("idle")
    assert order(busy, quiet, idle) == ["idle", "quiet", "busy"]


def test_engine_queue_counts_as_outstanding_work() -> None:
    queued = load("queued", in_flight=0, waiting=5)
    ours = load("ours", in_flight=2, waiting=0)
    assert order(queued, ours) == ["ours", "queued"]


def test_first_choice_is_explained_with_its_outstanding_count() -> None:
    plan = decide_for(
        "m",
        LoadSnapshot((load("a", in_flight=2, waiting=1), load("b", in_flight=4))),
        random.Random(0),
    )
    assert plan.reasons[0] == "least outstanding: a (3 outstanding)"


def test_outstanding_is_in_flight_plus_waiting() -> None:
    assert load("x", in_flight=2, waiting=3).outstanding == 5
    assert load("x", in_flight=2, waiting=None).outstanding == 2


def test_ties_are_broken_at_random() -> None:
    rng = random.Random(1234)
    snapshot = LoadSnapshot(
        (load("a", in_flight=1), load("b", in_flight=1), load("c", in_flight=2))
    )
    firsts: Counter[str] = Counter()
    for _ in range(200):
        targets = decide_for("m", snapshot, rng).targets
        firsts[targets[0].name] += 1
        assert targets[2].name == "c"
    assert firsts["a"] > 40
    assert firsts["b"] > 40
    assert firsts["a"] + firsts["b"] == 200


def test_same_seed_gives_the_same_tie_break() -> None:
    backends = tuple(load(name) for name in "abcdef")
    runs = [order(*backends, seed=42) for _ in range(2)]
    assert runs[0] == runs[1]
    assert sorted(runs[0]) == list("abcdef")


def test_ollama_with_the_model_loaded_goes_before_an_idle_one_without() -> None:
    cold = load("cold", kind="ollama", loaded=set())
    warm = load("warm", kind="ollama", in_flight=5, loaded={"m"})
    assert order(cold, warm) == ["warm", "cold"]


def test_loaded_check_uses_the_engine_model_name() -> None:
    models = {"llama": "llama3.1:8b"}
    public_name_only = load("public", kind="ollama", models=models, loaded={"llama"})
    engine_name = load("engine", kind="ollama", models=models, in_flight=3, loaded={"llama3.1:8b"})
    assert order(public_name_only, engine_name, model="llama") == ["engine", "public"]


def test_backend_that_does_not_report_loaded_models_is_not_cold() -> None:
    vllm = load("vllm", in_flight=1)  # loaded_models None: vLLM does not say
    cold = load("cold", kind="ollama", loaded={"other"})
    assert order(cold, vllm) == ["vllm", "cold"]


def test_has_loaded_is_none_when_the_engine_does_not_say() -> None:
    assert load("x").has_loaded("m") is None
    assert load("x", loaded={"m"}).has_loaded("m") is True
    assert load("x", loaded={"m"}).has_loaded("n") is False


def test_backends_not_serving_the_model_are_not_candidates() -> None:
    other = load("other", models={"n": "n"})
    plan = decide_for("m", LoadSnapshot((other, load("mine", in_flight=9))), random.Random(0))
    assert [t.name for t in plan.targets] == ["mine"]
    assert not any("other" in reason for reason in plan.reasons)


def test_plan_maps_the_public_model_to_each_engine_name() -> None:
    vllm = load("gpu", models={"llama": "meta-llama/Llama-3.1-8B-Instruct"})
    ollama = load("mac", kind="ollama", models={"llama": "llama3.1:8b"}, in_flight=1)
    plan = decide_for("llama", LoadSnapshot((ollama, vllm)), random.Random(0))
    assert plan.model == "llama"
    assert plan.targets == (
        Target("local", "gpu", "meta-llama/Llama-3.1-8B-Instruct"),
        Target("local", "mac", "llama3.1:8b"),
    )


def test_target_route_names_the_local_backend() -> None:
    assert Target("local", "gpu-1", "x").route == "local/gpu-1"


def test_why_none_without_reasons_says_nothing_serves_the_model() -> None:
    plan = decide_for("ghost", LoadSnapshot((load("a"),)), random.Random(0))
    assert plan.targets == ()
    assert plan.why_none == "no target serves model 'ghost'"


def test_why_none_joins_every_reason() -> None:
    snapshot = LoadSnapshot(
        (load("a", healthy=False, error="timeout"), load("b", healthy=False, error="HTTP 500"))
    )
    plan = decide_for("m", snapshot, random.Random(0))
    assert plan.why_none == "unhealthy: a (timeout); unhealthy: b (HTTP 500)"


def test_why_none_of_a_hand_built_plan() -> None:
    assert RoutingPlan("m", (), ("x", "y")).why_none == "x; y"


def test_empty_snapshot_has_no_targets() -> None:
    plan = decide_for("m", LoadSnapshot(), random.Random(0))
    assert (plan.targets, plan.reasons) == ((), ())


def test_serving_keeps_snapshot_order_and_filters_by_public_name() -> None:
    a = load("a", models={"m": "x"})
    b = load("b", models={"n": "m"})  # serves "n" under the engine name "m"
    c = load("c", models={"m": "m", "n": "n"}, healthy=False)
    snapshot = LoadSnapshot((a, b, c))
    assert [x.name for x in snapshot.serving("m")] == ["a", "c"]
    assert [x.name for x in snapshot.serving("n")] == ["b", "c"]
    assert snapshot.serving("zzz") == []


def test_public_models_are_sorted_and_unique() -> None:
    snapshot = LoadSnapshot(
        (load("a", models={"qwen": "q", "llama": "l"}), load("b", models={"llama": "x"}))
    )
    assert snapshot.public_models() == ["llama", "qwen"]
    assert LoadSnapshot().public_models() == []


# --- [balancing]: prefix affinity, least loaded, round robin ------------------------------------


def balanced(
    *backends: BackendLoad,
    strategy: str = "prefix",
    prefix: Mapping[str, int] | None = None,
    turn: int = 0,
    seed: int = 0,
    **settings: float,
) -> RoutingPlan:
    """decide() for these backends under a [balancing] table, with the given prefix facts."""
    declared = tuple(Backend(b.name, b.kind, f"http://{b.name}:1") for b in backends)
    balancing = Balancing(strategy=strategy, **settings)  # type: ignore[arg-type]
    facts = RequestFacts("m", prefix=prefix or {}, turn=turn)
    policy = Policy(backends=declared, balancing=balancing)
    return decide(facts, policy, LoadSnapshot(backends), random.Random(seed))


def names(plan: RoutingPlan) -> list[str]:
    return [target.name for target in plan.targets]


def test_prefix_holder_goes_first_when_it_holds_enough() -> None:
    plan = balanced(
        load("idle"),
        load("holder", in_flight=2),
        load("busy", in_flight=3),
        prefix={"holder": 256, "busy": 64},
    )
    assert names(plan) == ["holder", "idle", "busy"]
    assert plan.reasons[0] == "prefix: holder holds 256 prompt tokens (2 outstanding)"


def test_the_longest_prefix_wins_among_holders() -> None:
    plan = balanced(
        load("short", in_flight=1),
        load("long", in_flight=1),
        load("idle"),
        prefix={"short": 300, "long": 900},
    )
    assert names(plan)[0] == "long"
    assert plan.reasons[0] == "prefix: long holds 900 prompt tokens (1 outstanding)"


def test_equal_prefixes_go_to_the_least_busy_holder() -> None:
    plan = balanced(
        load("a", in_flight=3),
        load("b", in_flight=1),
        load("idle"),
        prefix={"a": 512, "b": 512},
    )
    assert names(plan) == ["b", "idle", "a"]
    assert plan.reasons[0] == "prefix: b holds 512 prompt tokens (1 outstanding)"


def test_a_holder_that_is_also_least_loaded_is_explained_by_its_prefix() -> None:
    plan = balanced(load("holder"), load("other", in_flight=2), prefix={"holder": 400})
    assert names(plan) == ["holder", "other"]
    assert plan.reasons[0] == "prefix: holder holds 400 prompt tokens (0 outstanding)"


def test_a_prefix_below_min_prefix_tokens_is_least_outstanding_order() -> None:
    plan = balanced(
        load("holder", in_flight=2),
        load("idle"),
        load("busy", in_flight=3),
        prefix={"holder": 255},
    )
    assert names(plan) == ["idle", "holder", "busy"]
    assert plan.reasons[0] == "least outstanding: idle (0 outstanding)"


def test_min_prefix_tokens_is_the_policys() -> None:
    backends = (load("holder", in_flight=2), load("idle"))
    low = balanced(*backends, prefix={"holder": 100}, min_prefix_tokens=100)
    high = balanced(*backends, prefix={"holder": 100}, min_prefix_tokens=101)
    assert names(low)[0] == "holder"
    assert names(high)[0] == "idle"


def test_no_prefix_at_all_is_least_outstanding_order() -> None:
    plan = balanced(load("b", in_flight=1), load("a"))
    assert names(plan) == ["a", "b"]
    assert plan.reasons[0] == "least outstanding: a (0 outstanding)"


def test_a_much_busier_holder_loses_to_the_least_loaded() -> None:
    """10 outstanding vs 2: more than balance_abs (4) beyond, and more than 1.5 times."""
    plan = balanced(
        load("holder", in_flight=10),
        load("quiet", in_flight=2),
        load("mid", in_flight=5),
        prefix={"holder": 1024},
    )
    assert names(plan) == ["quiet", "mid", "holder"]
    assert plan.reasons[0] == (
        "prefix on holder (1024 tokens) but it is much busier (10 vs 2 outstanding): "
        "least outstanding: quiet (2 outstanding)"
    )


def test_engine_queue_counts_toward_much_busier() -> None:
    plan = balanced(load("holder", in_flight=1, waiting=8), load("idle"), prefix={"holder": 512})
    assert names(plan) == ["idle", "holder"]
    assert plan.reasons[0].startswith("prefix on holder (512 tokens) but it is much busier (9 vs 0")


def test_only_the_absolute_threshold_exceeded_keeps_the_holder_first() -> None:
    """20 vs 15 outstanding: 5 more (> 4) but only 1.33 times as many (not > 1.5)."""
    plan = balanced(
        load("holder", in_flight=20), load("other", in_flight=15), prefix={"holder": 512}
    )
    assert names(plan) == ["holder", "other"]
    assert plan.reasons[0] == "prefix: holder holds 512 prompt tokens (20 outstanding)"


def test_only_the_relative_threshold_exceeded_keeps_the_holder_first() -> None:
    """4 vs 1 outstanding: four times as many (> 1.5) but only 3 more (not > 4)."""
    plan = balanced(load("holder", in_flight=4), load("other", in_flight=1), prefix={"holder": 512})
    assert names(plan) == ["holder", "other"]
    assert plan.reasons[0] == "prefix: holder holds 512 prompt tokens (4 outstanding)"


def test_exactly_at_both_thresholds_keeps_the_holder_first() -> None:
    """Both thresholds are strict: 12 vs 8 is 4 more and exactly 1.5 times as many."""
    plan = balanced(
        load("holder", in_flight=12), load("other", in_flight=8), prefix={"holder": 512}
    )
    assert names(plan)[0] == "holder"


def test_balance_thresholds_are_the_policys() -> None:
    backends = (load("holder", in_flight=3), load("other", in_flight=1))
    strict = balanced(*backends, prefix={"holder": 512}, balance_abs=1, balance_rel=2)
    lax = balanced(*backends, prefix={"holder": 512}, balance_abs=1, balance_rel=3)
    assert names(strict)[0] == "other"
    assert names(lax)[0] == "holder"


def test_least_loaded_ignores_the_prefix() -> None:
    plan = balanced(
        load("holder", in_flight=2),
        load("idle"),
        strategy="least_loaded",
        prefix={"holder": 4096},
    )
    assert names(plan) == ["idle", "holder"]
    assert plan.reasons[0] == "least outstanding: idle (0 outstanding)"


def test_round_robin_rotates_with_the_turn_over_backends_by_name() -> None:
    backends = (load("c", in_flight=9), load("a"), load("b", in_flight=1))
    orders = [names(balanced(*backends, strategy="round_robin", turn=t)) for t in range(4)]
    assert orders == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]


def test_round_robin_ignores_load_and_prefix() -> None:
    plan = balanced(
        load("a", in_flight=50),
        load("b"),
        strategy="round_robin",
        turn=0,
        prefix={"b": 4096},
    )
    assert names(plan) == ["a", "b"]
    assert plan.reasons[0] == "round robin: a"


def test_round_robin_reason_names_the_turns_backend() -> None:
    plan = balanced(load("a"), load("b"), load("c"), strategy="round_robin", turn=7)
    assert plan.reasons[0] == "round robin: b"


def test_round_robin_skips_unusable_backends() -> None:
    backends = (load("a"), load("b", healthy=False), load("c"))
    orders = [names(balanced(*backends, strategy="round_robin", turn=t)) for t in range(2)]
    assert orders == [["a", "c"], ["c", "a"]]


def test_a_tenant_past_its_budget_gets_no_cloud_target_and_is_told_why() -> None:
    policy = Policy(
        backends=(Backend("a", "vllm", "http://a:1", max_concurrency=1),),
        clouds=(CloudTarget("mini", "openai/gpt-4o-mini"),),
        routes=(Route("m", cloud=("mini",), overflow=Overflow(max_inflight_ratio=1.0)),),
    )
    busy = LoadSnapshot((load("a", in_flight=1),))
    rng = random.Random(0)
    overflowing = decide(RequestFacts("m"), policy, busy, rng)
    assert [t.route for t in overflowing.targets] == ["cloud/mini", "local/a"]
    closed = decide(RequestFacts("m", no_cloud="budget: tenant 'acme' spent it"), policy, busy, rng)
    assert [t.route for t in closed.targets] == ["local/a"]  # waits for the saturated local
    assert "budget: tenant 'acme' spent it" in closed.reasons


@pytest.mark.parametrize(
    ("targets", "saturated", "waits", "room"),
    [
        ((), frozenset(), False, False),
        ((Target("local", "a", "m"),), frozenset(), False, True),
        ((Target("local", "a", "m"), Target("local", "b", "m")), frozenset({"a"}), True, False),
        ((Target("cloud", "c", "m"), Target("local", "a", "m")), frozenset({"a"}), False, False),
    ],
    ids=["nothing", "local-with-room", "full-local-first", "cloud-first"],
)
def test_a_plan_says_whether_it_would_queue_for_a_local_backend(
    targets: tuple[Target, ...], saturated: frozenset[str], waits: bool, room: bool
) -> None:
    plan = RoutingPlan("m", targets, (), saturated=saturated)
    assert plan.waits_for_local is waits
    assert plan.local_room_now is room
    assert plan.pressed is (not targets or waits)
