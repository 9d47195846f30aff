"""GET /metrics: the proxy's state in Prometheus text format, read from Services at scrape time.

A custom collector over the live objects (no second set of counters to keep in sync), beside the
per-request counters and histograms of proxy/ops/observe.py; low-cardinality labels only.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response

from cache.stats import CacheStats
from cache.verifier import STEPS, Verifier
from proxy.services import Services

_BREAKER_STATES = ("closed", "half_open", "open")


class ServicesCollector(Collector):
    def __init__(self, services: Services) -> None:
        self.services = services

    def collect(self) -> Iterator[Metric]:
        services = self.services
        reloads = CounterMetricFamily(
            "overspill_policy_reloads", "Policy reloads by result.", labels=["result"]
        )
        counts = services.watcher.counts if services.watcher else {"ok": 0, "rejected": 0}
        for result, count in counts.items():
            reloads.add_metric([result], count)
        yield reloads
        last_ok = GaugeMetricFamily(
            "overspill_policy_last_reload_ok", "1 if the last reload was accepted, 0 if rejected."
        )
        last = services.watcher.last if services.watcher else None
        last_ok.add_metric([], 1.0 if last is None or last.ok else 0.0)
        yield last_ok
        yield from self._backends()
        yield self._breakers()
        cost = CounterMetricFamily("overspill_cloud_cost_usd", "Cloud spend (litellm prices).")
        cost.add_metric([], services.runtime.cloud.spent)
        yield cost
        yield from self._cache()
        yield from self._admission()
        yield from self._scans()

    def _scans(self) -> Iterator[Metric]:
        scans = self.services.runtime.scans
        started = CounterMetricFamily(
            "overspill_privacy_thread_scans",
            "Long request bodies scanned for personal data in a worker thread.",
        )
        started.add_metric([], scans.started)
        yield started
        running = GaugeMetricFamily(
            "overspill_privacy_thread_scans_running", "Long-body scans under way in threads."
        )
        running.add_metric([], scans.running)
        yield running
        late = CounterMetricFamily(
            "overspill_privacy_scans_timed_out",
            "Long-body scans past [privacy] scan_timeout_s: the request counted as if every "
            "detector had fired.",
        )
        late.add_metric([], scans.timed_out)
        yield late

    def _admission(self) -> Iterator[Metric]:
        runtime = self.services.runtime
        rejected = CounterMetricFamily(
            "overspill_rejected_requests",
            "Requests refused before any work, by the limit they hit.",
            labels=["limit"],
        )
        refusals = {
            **runtime.gate.refused,
            "max_wait_s": runtime.room.refused,
            "queue_timeout": runtime.room.timed_out,
        }
        for limit, count in sorted(refusals.items()):
            rejected.add_metric([limit], count)
        yield rejected
        waiting = GaugeMetricFamily(
            "overspill_queue_waiting",
            "Requests waiting in the proxy for a local engine, by public model.",
            labels=["model"],
        )
        for model in runtime.room.models():
            waiting.add_metric([model], runtime.room.waiting(model))
        yield waiting

    def _cache(self) -> Iterator[Metric]:
        answers = self.services.runtime.answers
        stats = answers.cache.stats
        lookups = CounterMetricFamily(
            "overspill_cache_lookups", "Cache lookups by result.", labels=["result"]
        )
        for result, count in (
            ("hit_exact", stats.hits_exact),
            ("hit_semantic", stats.hits_semantic),
            ("miss", stats.misses),
        ):
            lookups.add_metric([result], count)
        yield lookups
        refused = CounterMetricFamily(
            "overspill_cache_guard_refusals",
            "Similar cached questions refused because something critical differed.",
        )
        refused.add_metric([], stats.refused)
        yield refused
        yield _referee(stats)
        yield _verifier(stats)
        yield _speculation(stats)
        if isinstance(answers.verifier, Verifier):
            yield _verifier_steps(answers.verifier)
        entries = GaugeMetricFamily("overspill_cache_entries", "Answers in the cache.")
        entries.add_metric([], len(answers.cache))
        yield entries
        shared = CounterMetricFamily(
            "overspill_coalesced_requests",
            "Requests that rode an identical request's upstream call instead of making one.",
        )
        shared.add_metric([], answers.coalescer.joined)
        yield shared

    def _backends(self) -> Iterator[Metric]:
        healthy = GaugeMetricFamily("overspill_backend_healthy", "1 if usable.", labels=["backend"])
        in_flight = GaugeMetricFamily(
            "overspill_backend_in_flight", "Requests in flight from this proxy.", labels=["backend"]
        )
        for view in self.services.runtime.backends.snapshot().backends:
            healthy.add_metric([view.name], 1.0 if view.healthy else 0.0)
            in_flight.add_metric([view.name], view.in_flight)
        yield healthy
        yield in_flight

    def _breakers(self) -> Metric:
        gauge = GaugeMetricFamily(
            "overspill_breaker_state",
            "1 for the breaker's current state.",
            labels=["target", "state"],
        )
        now = self.services.runtime.clock.now()
        for name, breaker in self.services.pipeline.breakers.items():
            state = breaker.state_at(now)
            for candidate in _BREAKER_STATES:
                gauge.add_metric([name, candidate], 1.0 if candidate == state else 0.0)
        return gauge


async def metrics(request: Request) -> Response:
    registry: CollectorRegistry = request.app.state.registry
    return Response(generate_latest(registry), media_type="text/plain; version=0.0.4")


def _referee(stats: CacheStats) -> Metric:
    refereed = CounterMetricFamily(
        "overspill_cache_referee_checks",
        "Borderline similarities the reference model settled, by outcome.",
        labels=["outcome"],
    )
    confirmed = stats.refereed - stats.overturned - stats.unrefereed
    for outcome, count in (
        ("confirmed", confirmed),
        ("overturned", stats.overturned),
        ("unavailable", stats.unrefereed),
    ):
        refereed.add_metric([outcome], count)
    return refereed


def _verifier(stats: CacheStats) -> Metric:
    verified = CounterMetricFamily(
        "overspill_cache_verifier_checks",
        "Similar cached questions the answer verifier read beside the one asked, by outcome.",
        labels=["outcome"],
    )
    for outcome, count in (
        ("agreed", stats.verified - stats.disagreed),
        ("disagreed", stats.disagreed),
        ("unavailable", stats.unverified),
    ):
        verified.add_metric([outcome], count)
    return verified


def _speculation(stats: CacheStats) -> Metric:
    speculated = CounterMetricFamily(
        "overspill_cache_speculations",
        "Lookups whose engine work started while the answer verifier read a candidate, by "
        "what came first: hit (the verifier agreed; the engine's request was withdrawn), engine "
        "(its answer began first; the reading was dropped), miss (the verifier refused).",
        labels=["first"],
    )
    refused = stats.speculated - stats.withdrawn - stats.overtaken
    for first, count in (("hit", stats.withdrawn), ("engine", stats.overtaken), ("miss", refused)):
        speculated.add_metric([first], count)
    return speculated


def _verifier_steps(verifier: Verifier) -> Metric:
    steps = CounterMetricFamily(
        "overspill_cache_verifier_verdicts",
        "The answer verifier's verdicts by how many readings they took: one_way (the first, "
        "stored question first, refused), both_ways (it agreed, so the other order was read: "
        "every pair served, and those the second reading refused).",
        labels=["step"],
    )
    for step in STEPS:
        steps.add_metric([step], verifier.steps[step])
    return steps
