"""Fault injection: what the simulator does wrong on purpose, to test the proxy's defences.

Faults are a frozen `Faults` value; `POST /_sim/faults` replaces it with a validated copy that
merges the fields sent (so a test can switch one fault on without restating the others), and each
request draws its fate from it with the simulator's seeded random generator.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from typing import Any, Literal

from proxy.errors import BadRequest

Verdict = Literal["ok", "error", "rate_limit"]
GzipWhen = Literal["off", "accepted", "always"]


@dataclass(frozen=True)
class Faults:
    rate_limit_rate: float = 0.0  # share of requests answered 429 (a 429 storm at 1.0)
    error_rate: float = 0.0  # share of the requests not rate-limited that fail with error_status
    error_status: int = 500  # 500, 502, 503 or 504
    retry_after_s: float = 1.0  # Retry-After sent with injected 429s
    extra_latency_ms: float = 0.0  # added before the first token of every request
    hang_s: float = 0.0  # every request hangs this long before its first token (0: off)
    drop_after_chunks: int | None = None  # streams are cut after this many chunks
    listener_down_s: float = 0.0  # last requested listener outage (an action, not a state)
    # "accepted": bodies gzip-compressed for a caller that accepts gzip, as providers behind
    # Cloudflare answer; "always": even to one that asked for identity (a broken gateway)
    gzip: GzipWhen = "off"
    error_text: str = ""  # words every injected error carries (a provider's IDs, keys, URLs)

    def draw(self, rng: random.Random) -> Verdict:
        if self.rate_limit_rate and rng.random() < self.rate_limit_rate:
            return "rate_limit"
        if self.error_rate and rng.random() < self.error_rate:
            return "error"
        return "ok"

    @property
    def delay_s(self) -> float:
        """How long a request waits before it even reaches the engine."""
        return self.extra_latency_ms / 1000 + self.hang_s


_RATES = ("error_rate", "rate_limit_rate")
_DURATIONS = ("retry_after_s", "extra_latency_ms", "hang_s", "listener_down_s")
_TEXTS = ("gzip", "error_text")  # read from a --fault flag as they are written


def merge_faults(current: Faults, changes: dict[str, Any]) -> Faults:
    """`current` with `changes` applied; a 400 names the first bad field."""
    known = {field.name for field in dataclasses.fields(Faults)}
    unknown = sorted(set(changes) - known)
    if unknown:
        raise BadRequest(
            f"unknown fault {unknown[0]!r}; known: {', '.join(sorted(known))}", param=unknown[0]
        )
    for name, value in changes.items():
        _check(name, value)
    return dataclasses.replace(current, **changes)


def _check(name: str, value: Any) -> None:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if name in _RATES and not (number and 0 <= value <= 1):
        raise BadRequest(f"{name} must be a number between 0 and 1", param=name)
    if name in _DURATIONS and not (number and value >= 0):
        raise BadRequest(f"{name} must be a non-negative number", param=name)
    if name == "error_status" and value not in (500, 502, 503, 504):
        raise BadRequest("error_status must be 500, 502, 503 or 504", param=name)
    if name == "gzip" and value not in ("off", "accepted", "always"):
        raise BadRequest('gzip must be "off", "accepted" or "always"', param=name)
    if name == "error_text" and not (isinstance(value, str) and len(value) <= 1000):
        raise BadRequest("error_text must be a string of at most 1000 characters", param=name)
    if (
        name == "drop_after_chunks"
        and value is not None
        and not (isinstance(value, int) and not isinstance(value, bool) and value >= 0)
    ):
        raise BadRequest("drop_after_chunks must be a non-negative integer or null", param=name)


def parse_fault_flag(flag: str) -> dict[str, Any]:
    """`--fault error_rate=0.2` on the command line: the same fields as the JSON endpoint."""
    name, sep, raw = flag.partition("=")
    if not sep:
        raise BadRequest(f"--fault expects NAME=VALUE, got {flag!r}")
    value: Any
    if name.strip() in _TEXTS:
        value = raw
    elif raw in ("null", "none", ""):
        value = None
    else:
        try:
            value = int(raw)
        except ValueError:
            try:
                value = float(raw)
            except ValueError as exc:
                raise BadRequest(f"--fault {name}: {raw!r} is not a number") from exc
    return {name.strip(): value}
