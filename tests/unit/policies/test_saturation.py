"""policies/saturation.py: thresholds, and hysteresis only for the engine's noisy signals."""

from __future__ import annotations

from policies.load import BackendLoad
from policies.model import Overflow
from policies.saturation import saturation


def backend(in_flight: int = 0, waiting: int | None = None) -> BackendLoad:
    return BackendLoad(
        name="a", kind="vllm", healthy=True, models={"m": "m"}, in_flight=in_flight, waiting=waiting
    )


def test_in_flight_counts_the_new_request() -> None:
    ratio = Overflow(max_inflight_ratio=1.0)
    assert not saturation(backend(in_flight=1), ratio, 2, 100, False).saturated
    verdict = saturation(backend(in_flight=2), ratio, 2, 100, False)
    assert verdict.saturated
    assert verdict.reason == "a in-flight/max_concurrency 1.50 > 1"


def test_an_idle_backend_of_one_sequence_is_usable_again_after_saturation() -> None:
    """The proxy's own count is exact: no hysteresis, or at max_concurrency 1 the backend
    would never be below 90% of one request again."""
    ratio = Overflow(max_inflight_ratio=1.0, hysteresis=0.1)
    assert saturation(backend(in_flight=1), ratio, 1, 100, False).saturated
    assert not saturation(backend(in_flight=0), ratio, 1, 100, True).saturated


def test_the_engine_queue_keeps_its_hysteresis() -> None:
    waiting = Overflow(max_waiting=10, hysteresis=0.2)
    assert not saturation(backend(waiting=9), waiting, None, 100, False).saturated
    held = saturation(backend(waiting=9), waiting, None, 100, True)
    assert held.saturated
    assert held.reason == "a waiting 9 > 8"  # below 10, not yet below 80% of it
    assert not saturation(backend(waiting=7), waiting, None, 100, True).saturated
