"""The engine driven one step at a time with a fake clock: schedule(), advance, complete()."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.errors import Overloaded
from proxy.sim.engine import Engine, Sequence, StepPlan
from proxy.sim.profile import EngineProfile
from proxy.sim.tokens import OutputPlan

BLOCK = 4


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def make_engine(**overrides: Any) -> tuple[Engine, FakeClock]:
    values: dict[str, Any] = {
        "max_seqs": 8,
        "decode_base_ms": 10.0,
        "decode_per_seq_ms": 2.0,
        "prefill_ms_per_token": 0.5,
        "max_batched_tokens": 1024,
        "kv_tokens": 1024,
        "block_size": BLOCK,
        "max_model_len": 1024,
    }
    clock = FakeClock()
    return Engine(EngineProfile(**{**values, **overrides}), clock), clock


def words(prefix: str, count: int) -> list[str]:
    return [f" {prefix}{i}" for i in range(count)]


def request(
    engine: Engine, clock: FakeClock, prompt: list[str], outputs: int, finish: str = "length"
) -> Sequence:
    output = OutputPlan(tuple(words("out", outputs)), finish)
    seq = Sequence(list(prompt), output, arrival=clock.now)
    engine.submit(seq)
    return seq


def step(engine: Engine, clock: FakeClock) -> StepPlan:
    plan = engine.schedule()
    clock.now += plan.duration_ms / 1000
    engine.complete(plan)
    return plan


def run_until_idle(engine: Engine, clock: FakeClock, limit: int = 1000) -> list[StepPlan]:
    plans: list[StepPlan] = []
    while engine.waiting or engine.running:
        assert len(plans) < limit, "engine did not drain"
        plans.append(step(engine, clock))
    return plans


def tokens_of(plan: StepPlan, seq: Sequence) -> int:
    return sum(n for s, n in plan.work if s is seq)


# -- step timing ------------------------------------------------------------------------------


async def test_step_time_is_decode_base_plus_per_sequence_plus_prefill_tokens() -> None:
    engine, clock = make_engine()
    request(engine, clock, words("a", 6), 3)
    request(engine, clock, words("b", 10), 3)
    prefill = step(engine, clock)
    decode = step(engine, clock)
    assert prefill.duration_ms == pytest.approx(10.0 + 2.0 * 2 + 0.5 * 16)
    assert decode.duration_ms == pytest.approx(10.0 + 2.0 * 2)


async def test_an_idle_step_takes_no_time() -> None:
    engine, _ = make_engine()
    plan = engine.schedule()
    assert (plan.work, plan.duration_ms) == ((), 0.0)


# -- batching and admission -------------------------------------------------------------------


async def test_at_most_max_seqs_run_and_the_rest_wait_in_arrival_order() -> None:
    engine, clock = make_engine(max_seqs=2)
    seqs = [request(engine, clock, words(f"p{i}", 5), 2) for i in range(4)]
    step(engine, clock)
    assert engine.running == seqs[:2]
    assert list(engine.waiting) == seqs[2:]


async def test_waiting_sequences_are_admitted_in_arrival_order_as_slots_free() -> None:
    engine, clock = make_engine(max_seqs=1)
    seqs = [request(engine, clock, words(f"p{i}", 5), 2) for i in range(3)]
    admitted: list[Sequence] = []
    while engine.waiting or engine.running:
        step(engine, clock)
        admitted += [seq for seq in engine.running if seq not in admitted]
    assert admitted == seqs


async def test_a_sequence_produces_its_planned_tokens_then_finishes_with_length() -> None:
    engine, clock = make_engine()
    seq = request(engine, clock, words("p", 6), 5, finish="length")
    plans = run_until_idle(engine, clock)
    assert len(plans) == 5  # one prefill step that emits the first token, then four decodes
    assert seq.generated == 5
    assert (seq.state, seq.finish_reason) == ("finished", "length")
    assert engine.stats.generation_tokens == 5
    assert engine.stats.finished["length"] == 1


async def test_a_sequence_finishes_with_stop_when_its_plan_says_so() -> None:
    engine, clock = make_engine()
    seq = request(engine, clock, words("p", 6), 3, finish="stop")
    run_until_idle(engine, clock)
    assert (seq.generated, seq.finish_reason) == (3, "stop")
    assert engine.stats.finished == {"stop": 1}
    assert seq.done.is_set()


async def test_a_finished_sequence_frees_its_blocks() -> None:
    engine, clock = make_engine()
    request(engine, clock, words("p", 9), 4)
    step(engine, clock)
    assert engine.pool.free_blocks == engine.pool.num_blocks - 3
    run_until_idle(engine, clock)
    assert engine.pool.free_blocks == engine.pool.num_blocks
    assert engine.pool.usage == 0.0


# -- prefix caching ---------------------------------------------------------------------------


async def test_a_shared_prompt_prefix_is_served_from_the_cache() -> None:
    engine, clock = make_engine()
    shared = words("shared", 5 * BLOCK)
    first = request(engine, clock, shared + words("x", 3), 2)
    first_prefill = step(engine, clock)
    run_until_idle(engine, clock)
    second = request(engine, clock, shared + words("y", 3), 2)
    second_prefill = step(engine, clock)
    assert first.cached_tokens == 0
    assert second.cached_tokens == 5 * BLOCK
    assert engine.stats.prefix_hits == 5 * BLOCK
    assert engine.stats.prefix_queries == 2 * (5 * BLOCK + 3)
    assert tokens_of(second_prefill, second) == 3
    assert second_prefill.duration_ms == pytest.approx(first_prefill.duration_ms - 0.5 * 20)


async def test_a_fully_cached_prompt_still_computes_its_last_block() -> None:
    engine, clock = make_engine()
    prompt = words("p", 3 * BLOCK)
    request(engine, clock, prompt, 1)
    run_until_idle(engine, clock)
    again = request(engine, clock, prompt, 1)
    plan = step(engine, clock)
    assert again.cached_tokens == 2 * BLOCK
    assert tokens_of(plan, again) == BLOCK
    assert again.generated == 1


async def test_identical_requests_admitted_in_the_same_step_share_the_prefix() -> None:
    # vLLM V1 keys a block as soon as it is scheduled (measured on vLLM 0.32: a burst of 16
    # requests sharing a 1.5k-token prefix computed it once), so the second request of the
    # same step finds the first one's blocks.
    engine, clock = make_engine()
    prompt = words("same", 4 * BLOCK + 1)
    a = request(engine, clock, prompt, 2)
    b = request(engine, clock, prompt, 2)
    plan = step(engine, clock)
    assert (a.cached_tokens, b.cached_tokens) == (0, 4 * BLOCK)
    assert engine.stats.prefix_hits == 4 * BLOCK
    assert tokens_of(plan, b) == 1
    assert plan.duration_ms == pytest.approx(10.0 + 2.0 * 2 + 0.5 * (len(prompt) + 1))


async def test_generated_output_is_cached_for_a_follow_up_prompt() -> None:
    engine, clock = make_engine()
    prompt = words("p", 6)
    first = request(engine, clock, prompt, 10)
    run_until_idle(engine, clock)
    # KV exists for the prompt and the first nine output tokens: 15 tokens, 3 full blocks.
    follow_up = prompt + list(first.output.tokens) + words("next", 5)
    second = request(engine, clock, follow_up, 1)
    step(engine, clock)
    assert second.cached_tokens == 3 * BLOCK


# -- chunked prefill --------------------------------------------------------------------------


async def test_a_long_prompt_is_prefilled_in_chunks_of_max_batched_tokens() -> None:
    engine, clock = make_engine(max_batched_tokens=8)
    seq = request(engine, clock, words("long", 20), 2)
    chunks = []
    while seq.first_token_at is None:
        chunks.append(tokens_of(step(engine, clock), seq))
    assert chunks == [8, 8, 4]
    assert engine.stats.prefill_tokens_computed == 20


async def test_decodes_are_scheduled_before_prefill_chunks() -> None:
    engine, clock = make_engine(max_batched_tokens=8)
    decoder = request(engine, clock, words("d", 3), 5)
    step(engine, clock)
    prefiller = request(engine, clock, words("long", 20), 2)
    plan = step(engine, clock)
    assert (tokens_of(plan, decoder), tokens_of(plan, prefiller)) == (1, 7)
    assert plan.duration_ms == pytest.approx(10.0 + 2.0 * 2 + 0.5 * 7)


# -- abort ------------------------------------------------------------------------------------


async def test_aborting_a_waiting_sequence_removes_it_at_the_next_schedule() -> None:
    engine, clock = make_engine(max_seqs=1)
    request(engine, clock, words("a", 5), 3)
    waiting = request(engine, clock, words("b", 5), 3)
    step(engine, clock)
    engine.abort(waiting)
    assert waiting in engine.waiting  # nothing happens until the next step
    step(engine, clock)
    assert waiting not in engine.waiting
    assert (waiting.state, waiting.finish_reason) == ("finished", "abort")
    assert engine.stats.finished["abort"] == 1
    assert waiting.generated == 0


async def test_aborting_a_running_sequence_frees_its_blocks() -> None:
    engine, clock = make_engine()
    seq = request(engine, clock, words("a", 9), 10)
    step(engine, clock)
    step(engine, clock)
    assert engine.pool.usage > 0
    engine.abort(seq)
    engine.schedule()
    assert engine.running == []
    assert engine.pool.usage == 0.0
    assert engine.pool.free_blocks == engine.pool.num_blocks
    assert engine.stats.aborted == 1
    assert seq.generated == 2


async def test_a_sequence_aborted_mid_step_gets_no_token_from_that_step() -> None:
    engine, clock = make_engine()
    seq = request(engine, clock, words("a", 5), 10)
    plan = engine.schedule()
    engine.abort(seq)
    engine.complete(plan)
    assert seq.generated == 0
    assert seq.first_token_at is None


async def test_aborting_a_finished_sequence_changes_nothing() -> None:
    engine, clock = make_engine()
    seq = request(engine, clock, words("a", 5), 1)
    run_until_idle(engine, clock)
    engine.abort(seq)
    engine.schedule()
    assert seq.finish_reason == "length"
    assert engine.stats.finished == {"length": 1}


# -- KV capacity ------------------------------------------------------------------------------


async def test_a_request_that_does_not_fit_in_the_kv_cache_waits_for_blocks() -> None:
    engine, clock = make_engine(kv_tokens=8 * BLOCK)
    big = request(engine, clock, words("big", 18), 2)  # 5 blocks, never more
    late = request(engine, clock, words("late", 14), 2)  # 4 more blocks: only 3 free
    step(engine, clock)
    assert engine.running == [big]
    assert list(engine.waiting) == [late]
    step(engine, clock)
    assert big.ended
    step(engine, clock)
    assert engine.running == [late]
    assert late.generated == 1


async def test_a_full_kv_cache_preempts_and_the_preempted_sequence_still_finishes() -> None:
    engine, clock = make_engine(kv_tokens=8 * BLOCK)
    a = request(engine, clock, words("a", 7), 12)
    b = request(engine, clock, words("b", 7), 12)
    run_until_idle(engine, clock)
    assert engine.stats.preemptions > 0
    assert (a.generated, b.generated) == (12, 12)
    assert (a.finish_reason, b.finish_reason) == ("length", "length")
    assert engine.stats.ttft.count == 2
    assert engine.stats.prompt_tokens == 14
    assert engine.stats.generation_tokens == 24
    assert engine.pool.usage == 0.0


async def test_preemption_requeues_the_newest_sequence_at_the_head() -> None:
    engine, clock = make_engine(kv_tokens=8 * BLOCK)
    old = request(engine, clock, words("a", 7), 12)
    new = request(engine, clock, words("b", 7), 12)
    while engine.stats.preemptions == 0:
        step(engine, clock)
    assert old in engine.running
    assert engine.waiting[0] is new
    assert (new.state, new.computed, new.blocks) == ("waiting", 0, [])


async def test_submit_beyond_max_waiting_is_refused() -> None:
    engine, clock = make_engine(max_waiting=2)
    request(engine, clock, words("a", 3), 1)
    request(engine, clock, words("b", 3), 1)
    with pytest.raises(Overloaded):
        request(engine, clock, words("c", 3), 1)
    assert len(engine.waiting) == 2
    assert engine.stats.requests_received == 2


# -- statistics -------------------------------------------------------------------------------


async def test_ttft_histogram_observes_one_value_per_finished_sequence() -> None:
    engine, clock = make_engine(max_seqs=2)
    for i in range(3):
        request(engine, clock, words(f"p{i}", 5), 2)
    plans = run_until_idle(engine, clock)
    first, second = plans[0].duration_ms / 1000, plans[1].duration_ms / 1000
    third_prefill = plans[2].duration_ms / 1000
    assert engine.stats.ttft.count == 3
    assert engine.stats.ttft.sum == pytest.approx(2 * first + (first + second + third_prefill))
    assert engine.stats.e2e.count == 3


async def test_prompt_token_counters_count_each_request_once() -> None:
    engine, clock = make_engine()
    request(engine, clock, words("a", 7), 3)
    request(engine, clock, words("b", 9), 3)
    run_until_idle(engine, clock)
    assert engine.stats.requests_received == 2
    assert engine.stats.prompt_tokens == 16
    assert engine.stats.prefill_tokens_computed == 16


async def test_a_sequence_preempted_during_prefill_counts_its_prompt_once() -> None:
    engine, clock = make_engine(kv_tokens=8 * BLOCK, max_batched_tokens=8)
    request(engine, clock, words("a", 7), 20)  # 2 blocks, grows while decoding
    late = request(engine, clock, words("b", 24), 2)  # 6 blocks: the cache is now full
    while late.state != "waiting" or engine.stats.preemptions == 0:
        step(engine, clock)
    assert late.first_token_at is None  # preempted before its prefill finished
    run_until_idle(engine, clock)
    assert late.generated == 2
    assert engine.stats.prompt_tokens == 7 + 24


async def test_admission_leaves_the_blocks_a_running_decode_needs() -> None:
    engine, clock = make_engine(kv_tokens=8 * BLOCK)
    running = request(engine, clock, words("a", 2 * BLOCK), 5)
    step(engine, clock)  # its next decode needs a third block
    late = request(engine, clock, words("b", 6 * BLOCK), 2)  # wants all six free blocks
    plan = step(engine, clock)
    assert tokens_of(plan, running) == 1
    assert late.state == "waiting"
    assert engine.stats.preemptions == 0
