"""`overspill sim --calibrate URL`: measure a real engine, write a simulator profile.

Measured, each with requests that share no prefix (fresh nonces) and have exact output lengths
(`ignore_eos`):
- prefill cost: time to first token for a short and a long prompt; the slope, per token of the
  simulator's own tokenizer (so the simulator charges the same time for the same text);
- decode step time at several batch sizes (median time between tokens while that many stream
  at once, the quicker of two runs), fitted to `decode_base_ms + decode_per_seq_ms x batch`;
- the most sequences the engine ran at once (its `num_requests_running` while flooded);
- the KV cache and its block size (vLLM's `cache_config_info`) and max_model_len (/v1/models),
  converted to simulator tokens with the measured tokens-per-text ratio.
`fit_profile` (pure) turns the measurements into an EngineProfile.
"""

from __future__ import annotations

import asyncio
import re
import statistics
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import aiohttp
import orjson

from proxy.sim.profile import EngineProfile, build_profile, profile_to_toml
from proxy.sim.workload import Batch, batch, closed_loop


@dataclass(frozen=True)
class Measurements:
    url: str
    model: str
    prefill: dict[int, float]  # prompt length in simulator tokens -> time to first token
    engine_prompt_tokens: int  # the same prompts as the engine counted them
    sim_prompt_tokens: int
    decode: dict[int, float]  # batch size -> median seconds between tokens
    max_step_tokens: int | None  # engine tokens: the largest step seen, a power of two bound
    max_running: int | None
    block_size: int | None  # engine tokens
    kv_tokens: int | None  # engine tokens
    max_model_len: int | None  # engine tokens

    @property
    def sim_tokens_per_engine_token(self) -> float:
        return self.sim_prompt_tokens / self.engine_prompt_tokens


def fit_line(points: dict[int, float]) -> tuple[float, float]:
    """Least squares y = a + b x; b is clamped at 0 (a step never gets cheaper with more work)."""
    xs, ys = list(points), list(points.values())
    if len(xs) == 1:
        return ys[0], 0.0
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mean_x) ** 2 for x in xs
    )
    slope = max(0.0, slope)
    return mean_y - slope * mean_x, slope


def fit_profile(m: Measurements) -> EngineProfile:
    ratio = m.sim_tokens_per_engine_token
    usable = {b: s for b, s in m.decode.items() if m.max_running is None or b <= m.max_running}
    base_s, per_seq_s = fit_line(usable or m.decode)
    _, prefill_s = fit_line(m.prefill)
    profile = replace(
        build_profile("vllm"),
        decode_base_ms=round(base_s * 1000, 3),
        decode_per_seq_ms=round(per_seq_s * 1000, 3),
        prefill_ms_per_token=round(max(0.0, prefill_s) * 1000, 4),
    )
    if m.max_running:
        profile = replace(profile, max_seqs=m.max_running)
    if m.block_size:
        profile = replace(profile, block_size=max(1, round(m.block_size * ratio)))
    if m.kv_tokens:
        kv_tokens = max(profile.block_size, round(m.kv_tokens * ratio))
        profile = replace(profile, kv_tokens=kv_tokens)
    if m.max_model_len:
        profile = replace(profile, max_model_len=max(1, round(m.max_model_len * ratio)))
    if m.max_step_tokens:
        profile = replace(profile, max_batched_tokens=max(1, round(m.max_step_tokens * ratio)))
    return profile


async def measure(url: str, model: str | None, max_batch: int) -> Measurements:
    model = model or await _first_model(url)
    await batch(url, model, 2, 16, 4)  # warm up (first requests are slower on every engine)
    prefill: dict[int, float] = {}
    engine_tokens = sim_tokens = 0
    for words in PREFILL_WORDS:
        fastest = (await _fastest_of_three(url, model, words, seed=words)).requests[0]
        prefill[fastest.sim_prompt_tokens] = fastest.ttft
        engine_tokens += fastest.prompt_tokens
        sim_tokens += fastest.sim_prompt_tokens
    max_step = await _max_step_tokens(url, model)
    decode: dict[int, float] = {}
    size = 1
    while size <= max_batch:
        decode[size] = await _decode_step(url, model, size)
        size *= 2
    max_running = await _max_running(url, model, max_batch)
    block_size, kv_tokens = await _cache_config(url)
    max_len = await _max_model_len(url, model)
    return Measurements(
        url,
        model,
        prefill,
        engine_tokens,
        sim_tokens,
        decode,
        max_step,
        max_running,
        block_size,
        kv_tokens,
        max_len,
    )


# Prompt lengths (words) whose time to first token gives the prefill cost. Prefill grows a little
# faster than linearly on CPUs; the simulator's linear model is fitted over typical lengths.
PREFILL_WORDS = (16, 100, 200, 400)


async def _decode_step(url: str, model: str, size: int) -> float:
    """Median time between tokens while `size` stream at once, the quicker of two runs: a
    neighbour's burst slows one run, and a profile fitted to it would be slow for good."""
    runs = [await batch(url, model, size, 16, 32, seed=100 + size + 1000 * i) for i in range(2)]
    return min(run.inter_token_p50 for run in runs)


async def _max_step_tokens(url: str, model: str) -> int | None:
    """Send more prompt tokens at once than any step can hold; read vLLM's step-size histogram."""
    before = _buckets((await _get(url + "/metrics") or b"").decode())
    if not before:
        return None
    await batch(url, model, 4, 900, 1, seed=77)
    after = _buckets((await _get(url + "/metrics") or b"").decode())
    grown = [le for le, count in after.items() if count > before.get(le, 0)]
    # cumulative buckets: the smallest bound that took every new step is the step-size bound
    total_new = after.get(float("inf"), 0) - before.get(float("inf"), 0)
    bounds = [le for le in sorted(grown) if after[le] - before.get(le, 0) == total_new]
    return int(bounds[0]) if bounds and bounds[0] != float("inf") else None


def _buckets(text: str) -> dict[float, float]:
    found = re.findall(
        r'^vllm:iteration_tokens_total_bucket\{[^}]*le="([^"]+)"[^}]*\} (\S+)$', text, re.MULTILINE
    )
    return {float(le.replace("+Inf", "inf")): float(count) for le, count in found}


async def _fastest_of_three(url: str, model: str, prompt_words: int, seed: int) -> Batch:
    """One request, one output token, three times: the fastest, least disturbed by noise."""
    tries = [await batch(url, model, 1, prompt_words, 1, seed=seed + i) for i in range(3)]
    return min(tries, key=lambda b: b.ttft_p50)


async def _get(url: str) -> bytes | None:
    try:
        async with aiohttp.ClientSession() as session, session.get(url) as response:
            return await response.read() if response.status == 200 else None
    except aiohttp.ClientError:
        return None


async def _first_model(url: str) -> str:
    listing = orjson.loads(await _get(url + "/v1/models") or b'{"data": []}')
    if not listing["data"]:
        raise RuntimeError(f"{url}/v1/models lists no model")
    return str(listing["data"][0]["id"])


async def _max_model_len(url: str, model: str) -> int | None:
    listing = orjson.loads(await _get(url + "/v1/models") or b'{"data": []}')
    for entry in listing["data"]:
        if entry["id"] == model and isinstance(entry.get("max_model_len"), int):
            return int(entry["max_model_len"])
    return None


async def _cache_config(url: str) -> tuple[int | None, int | None]:
    text = (await _get(url + "/metrics") or b"").decode()
    info = re.search(r"^vllm:cache_config_info\{([^}]*)\}", text, re.MULTILINE)
    if not info:
        return None, None
    labels = dict(re.findall(r'(\w+)="([^"]*)"', info.group(1)))
    block = int(labels["block_size"]) if labels.get("block_size", "").isdigit() else None
    blocks = labels.get("num_gpu_blocks", "")
    return block, (block * int(blocks) if block and blocks.isdigit() else None)


async def _max_running(url: str, model: str, max_batch: int) -> int | None:
    """Flood with twice `max_batch` requests and watch the engine's running count."""
    flood = asyncio.create_task(batch(url, model, 2 * max_batch, 8, 24, seed=999))
    peak: int | None = None
    while not flood.done():
        text = (await _get(url + "/metrics") or b"").decode()
        running = re.search(r"^vllm:num_requests_running\{[^}]*\} (\S+)$", text, re.MULTILINE)
        if running:
            peak = max(peak or 0, int(float(running.group(1))))
        await asyncio.sleep(0.05)
    await flood
    return peak


def summary(m: Measurements, profile: EngineProfile) -> str:
    ratio = m.sim_tokens_per_engine_token
    lines = [
        f"calibrated against {m.url} ({m.model}) on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        "ttft by prompt length (simulator tokens): "
        + ", ".join(f"{n}: {s * 1000:.0f} ms" for n, s in m.prefill.items()),
        f"largest step: {m.max_step_tokens} engine tokens",
        "decode step: " + ", ".join(f"batch {b}: {s * 1000:.1f} ms" for b, s in m.decode.items()),
        f"max running: {m.max_running}, block size: {m.block_size}, kv tokens: {m.kv_tokens}, "
        f"max_model_len: {m.max_model_len} (engine tokens)",
        f"simulator tokens per engine token: {ratio:.3f}",
        f"fit: decode {profile.decode_base_ms} ms + {profile.decode_per_seq_ms} ms x batch, "
        f"prefill {profile.prefill_ms_per_token} ms per simulator token",
    ]
    return "\n".join(lines)


def calibrate(url: str, model: str | None, max_batch: int) -> tuple[EngineProfile, str]:
    """Measure `url` and return the fitted profile with its TOML text (a commented header)."""
    measurements = asyncio.run(measure(url.rstrip("/"), model, max_batch))
    profile = fit_profile(measurements)
    text = summary(measurements, profile)
    return profile, profile_to_toml(profile, comment=text)


@dataclass(frozen=True)
class Comparison:
    """The same closed-loop workload on the real engine and on the calibrated simulator."""

    concurrency: int
    real: Batch
    simulated: Batch

    @property
    def ttft_error(self) -> float:
        return self.simulated.ttft_mean / self.real.ttft_mean - 1

    @property
    def throughput_error(self) -> float:
        return self.simulated.tokens_per_second / self.real.tokens_per_second - 1


async def compare(
    real_url: str,
    sim_url: str,
    model: str,
    levels: tuple[int, ...] = (1, 4, 16),
    prompt_words: int = 150,
    max_tokens: int = 16,
) -> list[Comparison]:
    """Mean time to first token and tokens/s at each concurrency, real then simulated."""
    rows = []
    for level in levels:
        requests = max(3, 2 * level)
        real = await closed_loop(real_url, model, level, requests, prompt_words, max_tokens)
        simulated = await closed_loop(sim_url, model, level, requests, prompt_words, max_tokens)
        rows.append(Comparison(level, real, simulated))
    return rows


def comparison_table(rows: list[Comparison]) -> str:
    lines = [
        "| concurrency | TTFT real (ms) | TTFT simulated (ms) | error | tokens/s real "
        "| tokens/s simulated | error |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row.concurrency} | {row.real.ttft_mean * 1000:.0f} "
            f"| {row.simulated.ttft_mean * 1000:.0f} | {row.ttft_error:+.0%} "
            f"| {row.real.tokens_per_second:.1f} | {row.simulated.tokens_per_second:.1f} "
            f"| {row.throughput_error:+.0%} |"
        )
    return "\n".join(lines)
