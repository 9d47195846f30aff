"""Is a local backend too busy for a route? The overflow thresholds, with hysteresis (pure).

A backend is saturated when any threshold the route sets is exceeded: the engine's waiting queue,
the proxy's in-flight requests against the backend's max_concurrency, KV-cache usage, or the
predicted time to first token against the route's TTFT SLO. Queueing delay grows like
rho / (1 - rho) as utilisation nears 1, so the predicted wait, not an average, is what matters.
A backend already saturated stays so until it is below (1 - hysteresis) of every limit, so a
backend hovering at a threshold does not flap between local and cloud. Hysteresis is for the
engine's signals, read by a probe and noisy (waiting, KV-cache usage, predicted TTFT); the
proxy's own in-flight count is exact, and with a hysteresis a backend of max_concurrency 1 would
never be below 90% of one request again.
"""

from __future__ import annotations

from dataclasses import dataclass

from policies.load import BackendLoad
from policies.model import Overflow


@dataclass(frozen=True)
class Verdict:
    saturated: bool
    reason: str  # e.g. "vllm-a waiting 14 > 8"; the first limit exceeded


def predicted_ttft(
    backend: BackendLoad, request_tokens: int, max_concurrency: int | None
) -> float | None:
    """Seconds until this request's first token: the work queued ahead of it (and one request's
    worth for a slot to free up) over the backend's token throughput. None when unknown."""
    rate = backend.token_rate
    if not rate:
        return None
    queued = backend.waiting or 0
    if max_concurrency is not None:
        queued = max(queued, backend.in_flight - max_concurrency + 1)
    if queued <= 0:
        return request_tokens / rate / 8  # a free slot: prefill only, a small share of the work
    ahead = queued * max(backend.mean_request_tokens or request_tokens, 1)
    return (ahead + request_tokens) / rate


def saturation(
    backend: BackendLoad,
    overflow: Overflow,
    max_concurrency: int | None,
    request_tokens: int,
    was_saturated: bool,
) -> Verdict:
    # counting this request: at a ratio of 1.0 the backend takes max_concurrency at once
    in_flight = (backend.in_flight + 1) / max_concurrency if max_concurrency else None
    ratio = overflow.max_inflight_ratio
    if in_flight is not None and ratio is not None and in_flight > ratio:
        return Verdict(
            True, f"{backend.name} in-flight/max_concurrency {_fmt(in_flight)} > {_fmt(ratio)}"
        )
    scale = 1 - overflow.hysteresis if was_saturated else 1.0
    checks: list[tuple[float | None, float | None, str]] = [
        (backend.waiting, overflow.max_waiting, "waiting"),
        (backend.kv_cache_usage, overflow.max_kv_cache_usage, "kv-cache usage"),
        (
            predicted_ttft(backend, request_tokens, max_concurrency),
            overflow.ttft_slo_s,
            "predicted TTFT s",
        ),
    ]
    for value, limit, what in checks:
        if value is None or limit is None:
            continue
        if value > limit * scale if was_saturated else value > limit:
            return Verdict(True, f"{backend.name} {what} {_fmt(value)} > {_fmt(limit * scale)}")
        if was_saturated and value >= limit * scale:
            return Verdict(
                True, f"{backend.name} {what} {_fmt(value)} not yet below {_fmt(limit * scale)}"
            )
    return Verdict(False, "")


def _fmt(value: float) -> str:
    return f"{value:g}" if float(value).is_integer() else f"{value:.2f}"
