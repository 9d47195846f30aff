"""A batched completions request in the engine: one sequence per prompt, submitted together,
each queued, batched and served from the prefix cache on its own (engine stepped by hand)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from proxy.errors import Overloaded
from proxy.sim.engine import Engine, Sequence
from proxy.sim.profile import build_profile
from proxy.sim.requests import parse_chat, parse_completions
from proxy.sim.simulator import ContextTooLong, Simulator
from proxy.sim.tokens import ToolCall, plan_call, tokenize


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


class OneEngine:
    """A ModelHost serving every model from one engine nobody runs: the test steps it."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.names: tuple[str, ...] = ("m",)
        self.held = 0

    async def acquire(self, model: str, keep_alive_s: float | None = None) -> Engine:
        self.held += 1
        return self.engine

    def release(self, model: str) -> None:
        self.held -= 1

    def engines(self) -> dict[str, Engine]:
        return {"m": self.engine}

    async def stop(self) -> None:
        pass


def simulator(**profile: Any) -> tuple[Simulator, OneEngine]:
    overrides = {"network_latency_ms": 0, "block_size": 4, **profile}
    built = build_profile("vllm", overrides=overrides)
    clock = Clock()
    host = OneEngine(Engine(built, clock))
    sim = Simulator("vllm", built, host, clock, random.Random(0))
    return sim, host


def batch(prompts: list[Any], **fields: Any) -> Any:
    return parse_completions({"model": "m", "prompt": prompts, "max_tokens": 3, **fields})


def step(engine: Engine) -> list[Sequence]:
    """One scheduler step; the sequences it worked on."""
    plan = engine.schedule()
    engine.complete(plan)
    return [seq for seq, _ in plan.work]


async def test_each_prompt_is_its_own_sequence_in_the_queue() -> None:
    sim, host = simulator()
    engine, seqs = await sim.start(batch(["one two", "three four five"]), streaming=True)
    assert [len(seq.prompt) for seq in seqs] == [2, 3]
    assert list(engine.waiting) == list(seqs)
    assert engine.stats.requests_received == 2
    assert host.held == 1  # the model is held once, for the whole request


async def test_a_batchs_sequences_share_one_progress_event() -> None:
    sim, _ = simulator()
    _, seqs = await sim.start(batch(["a", "b", "c"]), streaming=True)
    assert seqs[0].progress is seqs[1].progress is seqs[2].progress
    _, (alone,) = await sim.start(batch(["d"]), streaming=True)
    assert alone.progress is not seqs[0].progress


async def test_the_prompts_run_side_by_side_and_each_gets_its_own_answer() -> None:
    sim, _ = simulator()
    engine, seqs = await sim.start(batch(["alpha", "beta"], seed=1), streaming=False)
    assert step(engine) == list(seqs)  # admitted and prefilled in the same step
    while engine.running:
        assert step(engine) == list(seqs)  # then decoded together, one token each per step
    assert [seq.generated for seq in seqs] == [3, 3]
    assert seqs[0].output.tokens != seqs[1].output.tokens


async def test_a_shared_prefix_in_a_batch_is_computed_once() -> None:
    prefix = "alpha beta gamma delta " * 3 + "alpha beta gamma delta"  # four full blocks
    sim, _ = simulator()
    engine, (first, second) = await sim.start(batch([prefix + " x", prefix + " y"]), False)
    step(engine)
    assert (first.cached_tokens, second.cached_tokens) == (0, 16)
    assert engine.stats.prefill_tokens_computed == len(first.prompt) + 1


async def test_prompts_beyond_max_seqs_wait_their_turn() -> None:
    sim, _ = simulator(max_seqs=2)
    engine, seqs = await sim.start(batch(["a", "b", "c"]), streaming=False)
    step(engine)
    assert [seq.state for seq in seqs] == ["running", "running", "waiting"]


async def test_one_prompt_too_long_refuses_the_batch_before_any_is_queued() -> None:
    sim, host = simulator(max_model_len=8)
    with pytest.raises(ContextTooLong):
        await sim.start(batch(["short", "far " * 10]), streaming=False)
    assert not host.engine.waiting
    assert host.held == 0


async def test_a_queue_too_full_for_the_batch_takes_none_of_it() -> None:
    sim, host = simulator(max_waiting=2)
    with pytest.raises(Overloaded):
        await sim.start(batch(["a", "b", "c"]), streaming=False)
    assert all(seq.aborted for seq in host.engine.waiting)
    assert host.held == 0
    step(host.engine)
    assert not host.engine.waiting
    assert dict(host.engine.stats.finished) == {"abort": 2}


# -- tool calls -------------------------------------------------------------------------------

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def calling(**fields: Any) -> Any:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": [WEATHER]}
    return (parse_chat({**body, "tool_choice": "required", **fields}),)


@pytest.mark.parametrize("distribution", ["exponential", "echo"])
async def test_a_called_tool_is_the_answer_whatever_the_profile(distribution: str) -> None:
    sim, _ = simulator(output_distribution=distribution)
    _, (seq,) = await sim.start(calling(), streaming=False)
    assert seq.output == plan_call(ToolCall("get_weather", '{"city":"example city"}'), None)
    assert seq.output.finish_reason == "tool_calls"


async def test_a_call_runs_through_the_engine_one_token_per_step_like_text() -> None:
    sim, _ = simulator()
    engine, (seq,) = await sim.start(calling(max_tokens=1000), streaming=False)
    steps = 0
    while not seq.ended:
        step(engine)
        steps += 1
    assert seq.generated == len(seq.output.tokens) == steps  # prefill + first token, then one each
    assert seq.finish_reason == "tool_calls"


async def test_a_call_longer_than_max_tokens_or_the_context_is_cut() -> None:
    sim, _ = simulator()
    _, (seq,) = await sim.start(calling(max_tokens=4), streaming=False)
    assert (len(seq.output.tokens), seq.output.finish_reason) == (4, "length")
    prompt = len(tokenize(calling()[0].prompt))
    sim, _ = simulator(max_model_len=prompt + 5)
    _, (seq,) = await sim.start(calling(), streaming=False)
    assert (len(seq.output.tokens), seq.output.finish_reason) == (5, "length")
