"""A circuit breaker per target, as an explicit state machine (pure: the caller passes `now`).

closed -> open: `consecutive_failures` failures in a row, or a failure rate of `failure_rate`
over the last `window_s` with at least `min_calls` calls.
open -> half-open: after `open_s`, up to `half_open_probes` requests are let through.
half-open -> closed: that many successes; -> open again: any failure.

`allow()` / `record_*()` rather than wrapping a call, because a stream can fail after the call
"succeeded": the pipeline records the outcome when it knows it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Literal

from policies.model import BreakerSettings

State = Literal["closed", "open", "half_open"]


@dataclass
class Breaker:
    settings: BreakerSettings
    state: State = "closed"
    consecutive_failures: int = 0
    opened_at: float = 0.0
    probes_in_flight: int = 0
    probe_successes: int = 0
    last_failure: str | None = None
    window: deque[tuple[float, bool]] = field(default_factory=deque)

    def allow(self, now: float) -> bool:
        """May a request go to this target now? (A half-open probe slot is taken if so.)"""
        if self.state == "open" and now - self.opened_at >= self.settings.open_s:
            self.state, self.probes_in_flight, self.probe_successes = "half_open", 0, 0
        if self.state == "closed":
            return True
        if self.state == "half_open" and self.probes_in_flight < self.settings.half_open_probes:
            self.probes_in_flight += 1
            return True
        return False

    def state_at(self, now: float) -> State:
        """The state a caller would find now: open past open_s lets probes through (half-open),
        though the switch itself waits for the next allow()."""
        if self.state == "open" and now - self.opened_at >= self.settings.open_s:
            return "half_open"
        return self.state

    def would_allow(self, now: float) -> bool:
        """`allow()` without taking a probe slot: for planning and explaining."""
        if self.state == "open":
            return now - self.opened_at >= self.settings.open_s
        if self.state == "half_open":
            return self.probes_in_flight < self.settings.half_open_probes
        return True

    def record_success(self, now: float) -> None:
        self._remember(now, ok=True)
        self.consecutive_failures = 0
        if self.state == "half_open":
            self.probes_in_flight = max(0, self.probes_in_flight - 1)
            self.probe_successes += 1
            if self.probe_successes >= self.settings.half_open_probes:
                self.state = "closed"
                self.window.clear()

    def record_failure(self, now: float, reason: str) -> None:
        self._remember(now, ok=False)
        self.consecutive_failures += 1
        self.last_failure = reason
        if self.state == "half_open" or self._tripped():
            self.state, self.opened_at = "open", now
            self.probes_in_flight = 0

    def release(self) -> None:
        """A probe that ended without a verdict (the client left): free its slot."""
        if self.state == "half_open":
            self.probes_in_flight = max(0, self.probes_in_flight - 1)

    def _tripped(self) -> bool:
        if self.consecutive_failures >= self.settings.consecutive_failures:
            return True
        calls = len(self.window)
        failures = sum(1 for _, ok in self.window if not ok)
        return calls >= self.settings.min_calls and failures / calls >= self.settings.failure_rate

    def _remember(self, now: float, ok: bool) -> None:
        self.window.append((now, ok))
        horizon = now - self.settings.window_s
        while self.window and self.window[0][0] < horizon:
            self.window.popleft()
