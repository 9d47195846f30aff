"""What outlives a policy: built once when the proxy starts, kept across every reload.

The engines (their probes, the HTTP session), the cloud leg, the names model, the answers
(cache and flights in the air), the tenants' loads and spend, the waiting room, what each
replica holds in its KV cache, the saturation memory, the clock and the random source. Services
owns it; each Pipeline (one per policy) reads and updates it and owns nothing long-lived but its
breakers. Wired once, here: a request leaving a backend wakes the waiting room.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from proxy.clock import Clock
from proxy.flow.affinity import Affinity
from proxy.flow.caching import Answers
from proxy.flow.caller import Scans
from proxy.flow.gate import Gate
from proxy.flow.waiting import WaitingRoom
from proxy.legs.backends import Backends
from proxy.legs.cloud import Cloud
from proxy.legs.ner import Ner
from proxy.legs.upstream import EngineClient


@dataclass(eq=False)
class Runtime:
    backends: Backends
    upstream: EngineClient
    cloud: Cloud
    rng: random.Random = field(default_factory=random.Random)
    answers: Answers = field(default_factory=Answers)
    gate: Gate = field(default_factory=Gate)
    affinity: Affinity = field(default_factory=Affinity)
    scans: Scans = field(default_factory=Scans)
    clock: Clock = field(default_factory=Clock)
    ner: Ner = field(default_factory=Ner)  # the names model, loaded when a policy needs it
    room: WaitingRoom = field(init=False)  # on the runtime's clock
    # hysteresis per model and priority class (each class has its own share of the backends)
    saturated: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.room = WaitingRoom(self.clock.now)
        self.backends.on_free = self.room.wake
