"""proxy/flow/affinity.py:
what each replica is believed to hold, and waiting for a prefill under way."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from policies.model import Balancing
from proxy.endpoints import Endpoint
from proxy.flow.affinity import Affinity, Prompt
from proxy.schema import ProxyRequest

# 8 tokens (32 characters) a block; a prefix is worth following from 8 blocks on.
BALANCING = Balancing(block_tokens=8, min_prefix_tokens=64, warm_wait_s=2.0)
SYSTEM = "You are the travel desk of a large company. Answer in one sentence. " * 8  # 544 chars


def chat(*contents: str) -> ProxyRequest:
    messages = [{"role": "system", "content": contents[0]}]
    messages += [{"role": "user", "content": text} for text in contents[1:]]
    return ProxyRequest("chat", "m", False, {"model": "m", "messages": messages})


def request(endpoint: Endpoint, body: dict[str, Any]) -> ProxyRequest:
    return ProxyRequest(endpoint, "m", False, {"model": "m", **body})


async def settle() -> None:
    """Let every task that can run, run (no wall-clock time passes)."""
    for _ in range(10):
        await asyncio.sleep(0)


@pytest.mark.parametrize("strategy", ["least_loaded", "round_robin"])
async def test_other_strategies_compute_no_prompt(strategy: str) -> None:
    affinity = Affinity()
    balancing = Balancing(strategy=strategy)  # type: ignore[arg-type]
    prompt = affinity.prompt(chat(SYSTEM, "Lyon?"), balancing)
    assert prompt == Prompt([], {}, {})
    assert await affinity.enter("a", prompt, balancing) == []
    assert len(affinity.index) == 0


def test_embeddings_have_no_prompt_prefix() -> None:
    prompt = Affinity().prompt(request("embeddings", {"input": SYSTEM}), BALANCING)
    assert prompt == Prompt([], {}, {})


def test_a_new_prompt_matches_nothing() -> None:
    prompt = Affinity().prompt(chat(SYSTEM, "Lyon?"), BALANCING)
    assert len(prompt.hashes) == len("<|system|>" + SYSTEM + "\n<|user|>Lyon?") // 32
    assert (prompt.held, prompt.matched) == ({}, {})


async def test_a_prompt_sharing_blocks_matches_them_on_the_backend_it_went_to() -> None:
    affinity = Affinity()
    first = affinity.prompt(chat(SYSTEM, "Which trains go to Lyon?"), BALANCING)
    await affinity.enter("a", first, BALANCING)
    second = affinity.prompt(chat(SYSTEM, "Which flights go to Oslo?"), BALANCING)
    shared = next(
        n for n, (x, y) in enumerate(zip(first.hashes, second.hashes, strict=False)) if x != y
    )
    assert shared >= len(SYSTEM) // 32 - 1  # every full block of the system prompt, about
    assert second.matched == {"a": shared}
    assert second.held == {"a": shared * BALANCING.block_tokens}


async def test_matches_on_several_backends() -> None:
    affinity = Affinity()
    await affinity.enter("a", affinity.prompt(chat(SYSTEM), BALANCING), BALANCING)
    affinity.leave("a", [])
    await affinity.enter("b", affinity.prompt(chat(SYSTEM[:200]), BALANCING), BALANCING)
    prompt = affinity.prompt(chat(SYSTEM, "Lyon?"), BALANCING)
    assert prompt.matched["a"] > prompt.matched["b"] > 0
    assert prompt.matched["b"] == len("<|system|>" + SYSTEM[:200]) // 32


async def test_a_different_prompt_matches_nothing() -> None:
    affinity = Affinity()
    await affinity.enter("a", affinity.prompt(chat(SYSTEM, "Lyon?"), BALANCING), BALANCING)
    other = affinity.prompt(chat("Something else entirely. " * 20, "Lyon?"), BALANCING)
    assert other.matched == {}


async def test_completions_prompts_match_too() -> None:
    affinity = Affinity()
    text = "Once upon a time, in a land far away, " * 10
    await affinity.enter(
        "a", affinity.prompt(request("completions", {"prompt": text}), BALANCING), BALANCING
    )
    longer = affinity.prompt(request("completions", {"prompt": text + "the end"}), BALANCING)
    assert longer.matched == {"a": len(text) // 32}


async def test_the_index_takes_its_bound_from_the_policy() -> None:
    affinity = Affinity()
    balancing = Balancing(block_tokens=8, min_prefix_tokens=64, index_blocks=5)
    await affinity.enter("a", affinity.prompt(chat(SYSTEM), balancing), balancing)
    assert len(affinity.index) == 5


async def test_a_long_new_prompt_leads_its_prefill() -> None:
    affinity = Affinity()
    prompt = affinity.prompt(chat(SYSTEM, "Lyon?"), BALANCING)
    assert await affinity.enter("a", prompt, BALANCING) == prompt.hashes


async def test_a_short_prompt_leads_nothing() -> None:
    affinity = Affinity()
    prompt = affinity.prompt(chat("Be brief.", "Lyon?"), BALANCING)
    assert 0 < len(prompt.hashes) * BALANCING.block_tokens < BALANCING.min_prefix_tokens
    assert await affinity.enter("a", prompt, BALANCING) == []


async def test_a_prompt_whose_prefix_is_already_held_leads_nothing() -> None:
    affinity = Affinity()
    first = affinity.prompt(chat(SYSTEM, "Lyon?"), BALANCING)
    affinity.leave("a", await affinity.enter("a", first, BALANCING))
    second = affinity.prompt(chat(SYSTEM, "Which flights go to Oslo tomorrow?"), BALANCING)
    assert await affinity.enter("a", second, BALANCING) == []
    assert affinity.waited == 0  # the first one's prefill was over


async def test_a_held_prefix_on_another_backend_is_led_again_there() -> None:
    affinity = Affinity()
    first = affinity.prompt(chat(SYSTEM, "Lyon?"), BALANCING)
    affinity.leave("a", await affinity.enter("a", first, BALANCING))
    second = affinity.prompt(chat(SYSTEM, "Oslo?"), BALANCING)
    assert await affinity.enter("b", second, BALANCING) == second.hashes


async def test_a_request_on_the_same_backend_waits_for_the_leaders_first_token() -> None:
    affinity = Affinity()
    first = affinity.prompt(chat(SYSTEM, "Which trains go to Lyon?"), BALANCING)
    led = await affinity.enter("a", first, BALANCING)
    assert led
    second = affinity.prompt(chat(SYSTEM, "Which flights go to Oslo?"), BALANCING)
    order: list[str] = []

    async def follower() -> None:
        await affinity.enter("a", second, BALANCING)
        order.append("follower entered")

    task = asyncio.create_task(follower())
    await settle()
    assert order == []
    assert affinity.waited == 0
    order.append("leader left")
    affinity.leave("a", led)
    async with asyncio.timeout(1):
        await task
    assert order == ["leader left", "follower entered"]
    assert affinity.waited == 1


async def test_a_request_on_another_backend_does_not_wait() -> None:
    affinity = Affinity()
    led = await affinity.enter("a", affinity.prompt(chat(SYSTEM, "Lyon?"), BALANCING), BALANCING)
    second = affinity.prompt(chat(SYSTEM, "Oslo?"), BALANCING)
    async with asyncio.timeout(1):
        await affinity.enter("b", second, BALANCING)
    assert affinity.waited == 0
    affinity.leave("a", led)


async def test_every_follower_waits_and_is_counted() -> None:
    affinity = Affinity()
    led = await affinity.enter("a", affinity.prompt(chat(SYSTEM, "q0"), BALANCING), BALANCING)
    prompts = [affinity.prompt(chat(SYSTEM, f"q{n}"), BALANCING) for n in range(1, 4)]
    tasks = [asyncio.create_task(affinity.enter("a", p, BALANCING)) for p in prompts]
    await settle()
    assert not any(task.done() for task in tasks)
    affinity.leave("a", led)
    async with asyncio.timeout(1):
        await asyncio.gather(*tasks)
    assert affinity.waited == 3


async def test_a_follower_gives_up_after_warm_wait_s() -> None:
    affinity = Affinity()
    balancing = Balancing(block_tokens=8, min_prefix_tokens=64, warm_wait_s=0.05)
    await affinity.enter("a", affinity.prompt(chat(SYSTEM, "Lyon?"), balancing), balancing)
    second = affinity.prompt(chat(SYSTEM, "Oslo?"), balancing)
    async with asyncio.timeout(2):
        await affinity.enter("a", second, balancing)  # the leader never leaves
    assert affinity.waited == 1


async def test_with_warm_wait_zero_nothing_is_led_and_nothing_waits() -> None:
    affinity = Affinity()
    balancing = Balancing(block_tokens=8, min_prefix_tokens=64, warm_wait_s=0)
    first = affinity.prompt(chat(SYSTEM, "Lyon?"), balancing)
    assert await affinity.enter("a", first, balancing) == []
    second = affinity.prompt(chat(SYSTEM, "Oslo?"), balancing)
    assert second.matched["a"] > 0  # still recorded, for routing
    async with asyncio.timeout(1):
        assert await affinity.enter("a", second, balancing) == []
    assert affinity.waited == 0


async def test_a_follower_matched_before_the_leader_entered_still_waits() -> None:
    """A burst: every request's prompt is matched (and planned) before any of them is sent,
    e.g. while the semantic cache lookup awaits its embedding. The follower still goes to the
    backend where the leader is prefilling the same prefix, and should wait for it there."""
    affinity = Affinity()
    first = affinity.prompt(chat(SYSTEM, "Which trains go to Lyon?"), BALANCING)
    second = affinity.prompt(chat(SYSTEM, "Which flights go to Oslo?"), BALANCING)
    led = await affinity.enter("a", first, BALANCING)
    task = asyncio.create_task(affinity.enter("a", second, BALANCING))
    await settle()
    waiting = not task.done()
    affinity.leave("a", led)
    async with asyncio.timeout(1):
        await task
    assert waiting
    assert affinity.waited == 1
