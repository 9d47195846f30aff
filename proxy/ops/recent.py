"""The last minutes of traffic, for the dashboard: where requests went, per public model, in
10-second buckets over the last 10 minutes, and the last decisions with their reasons. Fed by
proxy/ops/observe.py as requests finish; bounded in memory whatever the traffic."""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

BUCKET_S = 10
BUCKETS = 60  # ten minutes
DECISIONS = 50


@dataclass
class Recent:
    clock: Callable[[], float] = time.time
    _buckets: deque[tuple[int, Counter[tuple[str, str]]]] = field(
        default_factory=lambda: deque(maxlen=BUCKETS)
    )
    # each decision's entry is built when a page asks for it (most never are)
    _decisions: deque[Callable[[], dict[str, Any]]] = field(
        default_factory=lambda: deque(maxlen=DECISIONS)
    )

    def add(self, model: str, decision: str, entry: Callable[[], dict[str, Any]]) -> None:
        start = int(self.clock() // BUCKET_S * BUCKET_S)
        if not self._buckets or self._buckets[-1][0] != start:
            self._buckets.append((start, Counter()))
        self._buckets[-1][1][(model, decision)] += 1
        self._decisions.append(entry)

    def snapshot(self) -> dict[str, Any]:
        """Buckets oldest first (empty ones included, so a chart's time axis is regular)."""
        now = int(self.clock() // BUCKET_S * BUCKET_S)
        counts = dict(self._buckets)
        buckets = []
        for start in range(now - (BUCKETS - 1) * BUCKET_S, now + 1, BUCKET_S):
            by_model: dict[str, dict[str, int]] = {}
            for (model, decision), n in counts.get(start, Counter()).items():
                by_model.setdefault(model, {})[decision] = n
            buckets.append({"at": start, "models": by_model})
        return {
            "bucket_s": BUCKET_S,
            "buckets": buckets,
            "decisions": [entry() for entry in reversed(self._decisions)],
        }
