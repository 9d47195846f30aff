"""The cloud personality's rate limit: a token bucket refilled at requests-per-minute / 60."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class RequestRateLimit:
    per_minute: int
    tokens: float = -1.0
    updated: float = 0.0

    def try_acquire(self, now: float) -> float | None:
        """None if the request may go ahead, else the seconds until it could."""
        rate = self.per_minute / 60.0
        if self.tokens < 0:
            self.tokens, self.updated = float(self.per_minute), now
        self.tokens = min(float(self.per_minute), self.tokens + (now - self.updated) * rate)
        self.updated = now
        if self.tokens >= 1 - 1e-9:  # a caller who waited exactly the advertised time gets in
            self.tokens -= 1
            return None
        return (1 - self.tokens) / rate
