"""Per-request counts and histograms as plain numbers, rendered as Prometheus families when
/metrics is scraped.

prometheus_client's metrics take a lock and a few method calls per update (a histogram: one per
bucket tried), about 11% of what the proxy adds to a forwarded request. Every request is tallied
on the event loop's one thread, and so is every scrape, so nothing here needs a lock: an update
is one dict look-up and an addition, and the cumulative buckets are summed at scrape time.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString


@dataclass
class CountTally:
    name: str  # rendered with the _total suffix, as a Prometheus counter is
    help: str
    labels: Sequence[str]
    values: Counter[tuple[str, ...]] = field(default_factory=Counter)  # ints, or floats

    def add(self, labels: tuple[str, ...], amount: int = 1) -> None:
        self.values[labels] += amount

    def family(self) -> Metric:
        metric = CounterMetricFamily(self.name, self.help, labels=self.labels)
        for labels, value in self.values.items():
            metric.add_metric(labels, value)
        return metric


@dataclass
class HistogramTally:
    name: str
    help: str
    labels: Sequence[str]
    bounds: Sequence[float]  # ascending; +Inf is added
    # per label values: the count in each bucket (not cumulative; +Inf last), then the sum
    rows: dict[tuple[str, ...], list[float]] = field(default_factory=dict)

    def observe(self, labels: tuple[str, ...], value: float) -> None:
        row = self.rows.get(labels)
        if row is None:
            row = self.rows[labels] = [0] * (len(self.bounds) + 2)
        row[bisect.bisect_left(self.bounds, value)] += 1  # the first bound >= value: its `le`
        row[-1] += value

    def family(self) -> Metric:
        metric = HistogramMetricFamily(self.name, self.help, labels=self.labels)
        edges = [*map(floatToGoString, self.bounds), "+Inf"]
        for labels, row in self.rows.items():
            cumulative, total = [], 0.0
            for edge, count in zip(edges, row[:-1], strict=True):
                total += count
                cumulative.append((edge, total))
            metric.add_metric(list(labels), cumulative, sum_value=row[-1])
        return metric


class Tallies(Collector):
    """The tallies a registry renders, in the order they were made."""

    def __init__(self) -> None:
        self.made: list[CountTally | HistogramTally] = []

    def count(self, name: str, help: str, labels: Sequence[str]) -> CountTally:
        tally = CountTally(name, help, labels)
        self.made.append(tally)
        return tally

    def histogram(
        self, name: str, help: str, labels: Sequence[str], bounds: Sequence[float]
    ) -> HistogramTally:
        tally = HistogramTally(name, help, labels, tuple(sorted(bounds)))
        self.made.append(tally)
        return tally

    def collect(self) -> Iterator[Metric]:
        for tally in self.made:
            yield tally.family()
