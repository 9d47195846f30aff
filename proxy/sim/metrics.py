"""vLLM's /metrics in Prometheus text format, from the engine's own counters.

Names and label sets follow vLLM's V1 engine (`model_name` and `engine` labels). Like vLLM 0.32
it no longer exports the old `vllm:gpu_cache_usage_perc`; the proxy reads both names.
"""

from __future__ import annotations

from proxy.sim.engine import Engine
from proxy.sim.stats import Histogram


def _number(value: float) -> str:
    if value == float("inf"):
        return "+Inf"
    return repr(float(value))


def _family(lines: list[str], name: str, kind: str, help_text: str) -> None:
    lines.append(f"# HELP {name} {help_text}")
    lines.append(f"# TYPE {name} {kind}")


def _histogram(lines: list[str], name: str, labels: str, histogram: Histogram) -> None:
    for bound, count in histogram.cumulative():
        lines.append(f'{name}_bucket{{{labels},le="{_number(bound)}"}} {_number(count)}')
    lines.append(f"{name}_count{{{labels}}} {_number(histogram.count)}")
    lines.append(f"{name}_sum{{{labels}}} {_number(histogram.sum)}")


def render_vllm_metrics(model_name: str, engine: Engine) -> str:
    labels = f'engine="0",model_name="{model_name}"'
    stats = engine.stats
    usage = engine.pool.usage
    lines: list[str] = []
    gauges = (
        (
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
            len(engine.running),
        ),
        (
            "vllm:num_requests_waiting",
            "Number of requests waiting to be processed.",
            len(engine.waiting),
        ),
        ("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", usage),
    )
    for name, help_text, value in gauges:
        _family(lines, name, "gauge", help_text)
        lines.append(f"{name}{{{labels}}} {_number(value)}")
    counters = (
        (
            "vllm:prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens.",
            stats.prefix_queries,
        ),
        (
            "vllm:prefix_cache_hits",
            "Prefix cache hits, in terms of number of cached tokens.",
            stats.prefix_hits,
        ),
        ("vllm:prompt_tokens", "Number of prefill tokens processed.", stats.prompt_tokens),
        (
            "vllm:generation_tokens",
            "Number of generation tokens processed.",
            stats.generation_tokens,
        ),
        (
            "vllm:num_preemptions",
            "Cumulative number of preemption from the engine.",
            stats.preemptions,
        ),
    )
    for name, help_text, value in counters:
        _family(lines, f"{name}_total", "counter", help_text)
        lines.append(f"{name}_total{{{labels}}} {_number(value)}")
    profile = engine.profile
    _family(lines, "vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig")
    lines.append(
        f'vllm:cache_config_info{{block_size="{profile.block_size}",enable_prefix_caching="True",'
        f'engine="0",kv_cache_size_tokens="{profile.kv_tokens}",'
        f'num_gpu_blocks="{profile.num_blocks}"}} 1.0'
    )
    name = "vllm:request_success_total"
    _family(lines, name, "counter", "Count of successfully processed requests.")
    for reason in ("stop", "length", "abort"):
        lines.append(
            f'{name}{{{labels},finished_reason="{reason}"}} {_number(stats.finished[reason])}'
        )
    _family(
        lines,
        "vllm:time_to_first_token_seconds",
        "histogram",
        "Histogram of time to first token in seconds.",
    )
    _histogram(lines, "vllm:time_to_first_token_seconds", labels, stats.ttft)
    _family(
        lines,
        "vllm:e2e_request_latency_seconds",
        "histogram",
        "Histogram of end to end request latency in seconds.",
    )
    _histogram(lines, "vllm:e2e_request_latency_seconds", labels, stats.e2e)
    return "\n".join(lines) + "\n"
