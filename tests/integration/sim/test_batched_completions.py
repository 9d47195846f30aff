"""A batched `prompt` on /v1/completions, through the official openai SDK, every personality:
one choice per prompt (index = the prompt's position), each the answer that prompt gets alone,
usage summed over the prompts and the choices; streamed, the choices' chunks interleave, each
choice finishes once, and the usage chunk comes last. The request is recorded once, as sent;
in the engine every prompt is a sequence of its own."""

from __future__ import annotations

import contextlib
import re
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai.types import Completion

from tests.clients import assert_openai_error
from tests.processes import FAST_ENGINE, Process, sim

MODEL = "m"
PROMPTS = ["Once upon a time", "In a galaxy far away", "The quick brown fox jumps"]
PERSONALITIES = ("vllm", "ollama", "cloud")


@pytest.fixture(scope="module")
def sims() -> Iterator[dict[str, Process]]:
    # Blocks larger than any prompt here: a request sent again finds nothing in the prefix
    # cache, so its usage (cached_tokens) and its bytes are the same as the first time.
    common = ("--model", MODEL, "--block-size", "1024", *FAST_ENGINE)
    extra = {"vllm": (), "ollama": ("--load-ms", "0"), "cloud": ("--network-latency-ms", "0")}
    with contextlib.ExitStack() as stack:
        yield {
            name: stack.enter_context(sim("--personality", name, *common, *extra[name]))
            for name in PERSONALITIES
        }


@pytest.fixture(scope="module")
def vllm() -> Iterator[Process]:
    """Default 16-token blocks, for the prefix cache."""
    with sim("--model", MODEL, *FAST_ENGINE) as process:
        yield process


def client(process: Process) -> openai.OpenAI:
    return openai.OpenAI(base_url=process.url + "/v1", api_key="sk-test-1234", max_retries=0)


def alone(api: openai.OpenAI, prompt: str, **fields: Any) -> Completion:
    """The answer to `prompt` sent on its own."""
    reply: Completion = api.completions.create(model=MODEL, prompt=prompt, **fields)
    return reply


@pytest.mark.parametrize("personality", PERSONALITIES)
def test_each_prompt_gets_its_own_choice_and_the_usage_is_summed(
    sims: dict[str, Process], personality: str
) -> None:
    api = client(sims[personality])
    batch = api.completions.create(model=MODEL, prompt=PROMPTS, max_tokens=5, seed=7)
    singles = [alone(api, prompt, max_tokens=5, seed=7) for prompt in PROMPTS]
    assert [choice.index for choice in batch.choices] == [0, 1, 2]
    assert [choice.text for choice in batch.choices] == [s.choices[0].text for s in singles]
    assert len({choice.text for choice in batch.choices}) == 3
    assert [choice.finish_reason for choice in batch.choices] == ["length"] * 3
    assert batch.usage is not None
    prompt_tokens = sum(s.usage.prompt_tokens for s in singles if s.usage)
    assert batch.usage.prompt_tokens == prompt_tokens
    assert batch.usage.completion_tokens == 15
    assert batch.usage.total_tokens == prompt_tokens + 15


@pytest.mark.parametrize("personality", PERSONALITIES)
def test_a_streamed_batch_interleaves_its_choices_then_sends_the_usage(
    sims: dict[str, Process], personality: str
) -> None:
    api = client(sims[personality])
    whole = api.completions.create(model=MODEL, prompt=PROMPTS, max_tokens=4, seed=3)
    chunks = list(
        api.completions.create(
            model=MODEL,
            prompt=PROMPTS,
            max_tokens=4,
            seed=3,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    texts: dict[int, str] = defaultdict(str)
    finishes: dict[int, list[str]] = defaultdict(list)
    order = []
    for chunk in chunks[:-1]:
        (choice,) = chunk.choices  # one choice per chunk, named by its index
        texts[choice.index] += choice.text
        order.append(choice.index)
        if choice.finish_reason:
            finishes[choice.index].append(choice.finish_reason)
    assert texts == {c.index: c.text for c in whole.choices}
    assert finishes == {0: ["length"], 1: ["length"], 2: ["length"]}
    assert order[:3] == [0, 1, 2]  # each prompt's first token, from the same engine step
    assert order != sorted(order)  # interleaved, not one choice after the other
    assert chunks[-1].choices == []
    assert chunks[-1].usage == whole.usage


def test_each_choice_finishes_for_its_own_reason(vllm: Process) -> None:
    api = client(vllm)
    first, second = (alone(api, p, max_tokens=12, temperature=0).choices[0] for p in PROMPTS[:2])
    stop = next(word for word in first.text.split()[1:] if word not in second.text)
    batch = api.completions.create(
        model=MODEL, prompt=PROMPTS[:2], max_tokens=12, temperature=0, stop=[stop]
    )
    assert [c.finish_reason for c in batch.choices] == ["stop", "length"]
    assert batch.choices[0].text == first.text[: first.text.index(stop)]
    assert batch.choices[1].text == second.text


def test_a_batch_of_token_id_arrays(vllm: Process) -> None:
    batch = client(vllm).completions.create(
        model=MODEL, prompt=[[1, 2, 3], [4, 5]], max_tokens=2, temperature=0
    )
    assert [c.index for c in batch.choices] == [0, 1]
    assert batch.usage is not None
    assert (batch.usage.prompt_tokens, batch.usage.completion_tokens) == (5, 4)


def engine_stats(process: Process) -> dict[str, Any]:
    stats: dict[str, Any] = httpx.get(process.url + "/_sim/stats").json()["engines"][MODEL]
    return stats


def test_each_prompt_is_a_sequence_and_a_shared_prefix_is_computed_once(vllm: Process) -> None:
    prefix = "You are the travel desk. Answer briefly and politely. " * 20  # ~200 tokens
    prompts = [prefix + "Trains to Lyon?", prefix + "Flights to Oslo?"]
    before = engine_stats(vllm)
    batch = client(vllm).completions.create(
        model=MODEL, prompt=prompts, max_tokens=2, temperature=0
    )
    after = engine_stats(vllm)
    assert batch.usage is not None
    assert after["requests"] - before["requests"] == 2  # one sequence per prompt
    details = batch.usage.prompt_tokens_details
    assert details is not None
    assert details.cached_tokens is not None
    cached = details.cached_tokens
    assert cached >= 160  # the second found the first's blocks, scheduled in the same step
    computed = after["prefill_tokens_computed"] - before["prefill_tokens_computed"]
    assert computed == batch.usage.prompt_tokens - cached


def test_the_request_is_recorded_once_as_sent(sims: dict[str, Process]) -> None:
    cloud = sims["cloud"]
    httpx.delete(cloud.url + "/_sim/requests")
    client(cloud).completions.create(model=MODEL, prompt=PROMPTS, max_tokens=2)
    log = httpx.get(cloud.url + "/_sim/requests").json()
    assert log["count"] == 1
    assert log["requests"][0]["path"] == "/v1/completions"
    assert log["requests"][0]["body"]["prompt"] == PROMPTS


_CREATED = re.compile(rb'"created":\d+')


@pytest.mark.parametrize("personality", PERSONALITIES)
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("sampling", [{"seed": 11}, {"temperature": 0}])
def test_the_same_batch_gets_the_same_bytes(
    sims: dict[str, Process], personality: str, stream: bool, sampling: dict[str, Any]
) -> None:
    body = {"model": MODEL, "prompt": PROMPTS, "max_tokens": 6, "stream": stream, **sampling}
    if stream:
        body["stream_options"] = {"include_usage": True}

    def answer() -> bytes:
        response = httpx.post(
            sims[personality].url + "/v1/completions", json=body, headers={"x-request-id": "b1"}
        )
        assert response.status_code == 200, response.text
        return _CREATED.sub(b'"created":0', response.content)

    assert answer() == answer()


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"prompt": []}, "prompt"),
        ({"prompt": ["a", [1, 2]]}, "prompt"),
        ({"prompt": [[1, 2], []]}, "prompt"),
        ({"prompt": [1, "a"]}, "prompt"),
        ({"prompt": ["a", "b"], "n": 2}, "n"),  # the simulator answers n=1 only
    ],
)
def test_empty_or_mixed_batches_are_openai_400s(
    sims: dict[str, Process], fields: dict[str, Any], param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client(sims["vllm"]).completions.create(model=MODEL, max_tokens=2, **fields)
    assert caught.value.param == param
    response = httpx.post(
        sims["cloud"].url + "/v1/completions", json={"model": MODEL, "max_tokens": 2, **fields}
    )
    assert_openai_error(response, 400, param)
