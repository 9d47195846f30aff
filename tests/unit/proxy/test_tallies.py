"""The per-request tallies render as prometheus_client's own metrics would, sample for sample
(their `_created` timestamps aside: a tally has none)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from proxy.ops.observe import BUCKETS
from proxy.ops.tallies import Tallies

LABELS = st.sampled_from(["local", "cloud", "cache"])
SECONDS = st.one_of(
    st.sampled_from([0.0, *BUCKETS]),  # on a bound: counted in its own bucket (le)
    st.floats(0, 400, allow_nan=False),
)


def exposition(registry: CollectorRegistry) -> list[str]:
    text = generate_latest(registry).decode()
    return [line for line in text.splitlines() if "_created" not in line]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(LABELS, SECONDS, st.integers(0, 5000)), max_size=40))
def test_tallies_render_as_prometheus_clients_metrics(
    observed: list[tuple[str, float, int]],
) -> None:
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    latency = Histogram("x_seconds", "Latency.", ["decision"], buckets=BUCKETS, registry=theirs)
    tokens = Counter("x_tokens", "Tokens.", ["decision"], registry=theirs)
    tallies = Tallies()
    our_latency = tallies.histogram("x_seconds", "Latency.", ["decision"], BUCKETS)
    our_tokens = tallies.count("x_tokens", "Tokens.", ["decision"])
    ours.register(tallies)
    for decision, seconds, count in observed:
        latency.labels(decision).observe(seconds)
        tokens.labels(decision).inc(count)
        our_latency.observe((decision,), seconds)
        our_tokens.add((decision,), count)
    assert sorted(exposition(ours)) == sorted(exposition(theirs))


def test_a_histogram_without_labels() -> None:
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    waited = Histogram("x_wait_seconds", "Waits.", buckets=BUCKETS, registry=theirs)
    tallies = Tallies()
    our_waited = tallies.histogram("x_wait_seconds", "Waits.", [], BUCKETS)
    ours.register(tallies)
    for seconds in (0.01, 0.5, 0.5, 700.0):
        waited.observe(seconds)
        our_waited.observe((), seconds)
    assert exposition(ours) == exposition(theirs)
