"""Drive an OpenAI-compatible engine with timed streamed requests (calibration and comparison).

Every request is a streamed completion with `ignore_eos` (vLLM's, ignored by the simulator), so
its output length is exactly `max_tokens` on both; each prompt starts with a fresh nonce, so no
prefix cache helps it. A request's timing is the arrival of each token's chunk.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import statistics
import time
import uuid
from dataclasses import dataclass

import aiohttp
import orjson

from proxy.sim.tokens import count_tokens

_WORDS = (
    "river mountain station ticket morning harbour garden window letter market bridge engine "
    "summer winter autumn spring forest meadow village island castle valley desert ocean cloud"
).split()
_nonces = itertools.count()


def prompt_of(words: int, rng: random.Random) -> str:
    """A prompt of about `words` words that shares no prefix with any other, in any process:
    an engine keeps its prefix cache between runs, so the nonce must never repeat."""
    nonce = f"{next(_nonces)}-{uuid.uuid4().hex[:12]}"
    return nonce + " " + " ".join(rng.choice(_WORDS) for _ in range(words))


@dataclass(frozen=True)
class Timed:
    sent: float
    token_times: tuple[float, ...]
    prompt_tokens: int  # as the engine counted them
    sim_prompt_tokens: int  # as the simulator's tokenizer counts the same text

    @property
    def ttft(self) -> float:
        return self.token_times[0] - self.sent

    @property
    def inter_token(self) -> float | None:
        times = self.token_times
        return (times[-1] - times[0]) / (len(times) - 1) if len(times) > 1 else None


@dataclass(frozen=True)
class Batch:
    requests: tuple[Timed, ...]
    seconds: float

    @property
    def ttft_p50(self) -> float:
        return statistics.median(r.ttft for r in self.requests)

    @property
    def ttft_mean(self) -> float:
        return statistics.fmean(r.ttft for r in self.requests)

    @property
    def tokens_per_second(self) -> float:
        return sum(len(r.token_times) for r in self.requests) / self.seconds

    @property
    def inter_token_p50(self) -> float:
        gaps = [g for r in self.requests if (g := r.inter_token) is not None]
        return statistics.median(gaps)


async def timed_request(
    session: aiohttp.ClientSession, url: str, model: str, prompt: str, max_tokens: int
) -> Timed:
    body = {
        "model": model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    sent = time.perf_counter()
    times: list[float] = []
    prompt_tokens = 0
    async with session.post(url + "/v1/completions", json=body) as response:
        response.raise_for_status()
        async for raw in response.content:
            line = raw.strip()
            if not line.startswith(b"data: {"):
                continue
            event = orjson.loads(line[6:])
            if event.get("choices") and event["choices"][0].get("text"):
                times.append(time.perf_counter())
            if event.get("usage"):
                prompt_tokens = event["usage"]["prompt_tokens"]
    return Timed(sent, tuple(times), prompt_tokens, count_tokens(prompt))


async def batch(
    url: str, model: str, concurrency: int, prompt_words: int, max_tokens: int, seed: int = 0
) -> Batch:
    """`concurrency` requests sent at once; wall time from the first sent to the last token."""
    rng = random.Random(seed)
    prompts = [prompt_of(prompt_words, rng) for _ in range(concurrency)]
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        start = time.perf_counter()
        results = await asyncio.gather(
            *(timed_request(session, url, model, p, max_tokens) for p in prompts)
        )
    end = max(r.token_times[-1] for r in results)
    return Batch(tuple(results), end - start)


async def closed_loop(
    url: str,
    model: str,
    concurrency: int,
    requests: int,
    prompt_words: int,
    max_tokens: int,
    seed: int = 0,
) -> Batch:
    """`concurrency` clients, each sending its next request when its last one is done, until
    `requests` have been sent: the steady state "at concurrency N" that capacity planning means."""
    rng = random.Random(seed)
    remaining = [prompt_of(prompt_words, rng) for _ in range(requests)]
    results: list[Timed] = []
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(timeout=timeout) as session:

        async def client() -> None:
            while remaining:
                prompt = remaining.pop()
                results.append(await timed_request(session, url, model, prompt, max_tokens))

        start = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(concurrency)))
    end = max(r.token_times[-1] for r in results)
    return Batch(tuple(results), end - start)
