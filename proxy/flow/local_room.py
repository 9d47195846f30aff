"""Would a waiting request find room at a local backend now? The waiting room asks this of each
waiter it considers. The answer is policies' decide() on the live load and breakers, with the
facts the request had when it began to wait: the room calls nothing above it, and the question
changes nothing (no round-robin turn taken, no hysteresis memory left)."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from policies.decide import RequestFacts, decide
from policies.load import LoadSnapshot
from policies.model import Policy


@dataclass(frozen=True)
class LocalRoom:
    facts: RequestFacts
    policy: Policy
    snapshot: Callable[[], LoadSnapshot]  # the backends' load, as the probes last saw it
    blocked: Callable[[], dict[str, str]]  # targets whose breaker refuses now, and why
    rng: random.Random

    def __call__(self) -> bool:
        # Saturation by the thresholds alone: hysteresis keeps traffic from flapping to the
        # cloud and back, but a waiter asks whether there is room now (and at max_concurrency 1
        # it would never see room again).
        plan = decide(self.facts, self.policy, self.snapshot(), self.rng, self.blocked())
        return plan.local_room_now
