"""The demo traffic's summary (pure): where each request went, as the proxy's headers say, and
how long it took: a stream's time to its first chunk (TTFT), a whole answer's time to arrive;
the live line and the final table.

Decisions are read, never guessed: `X-Overspill-Route` is `cache`, `local/<backend>` or
`cloud/<target>`; an answer without one of those is refused (4xx, 503) or an error, as the
proxy's own metrics count them (proxy/ops/observe.py).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

DECISIONS = ("local", "cloud", "cache", "refused", "error")
ANSWERED = ("local", "cloud", "cache")


@dataclass(frozen=True)
class Outcome:
    kind: str  # the kind of request (proxy/demo/mix.py)
    tenant: str
    decision: str  # one of DECISIONS
    stream: bool
    first_byte_s: float | None  # when the first byte of the body came; None: none came

    def seconds(self, stream: bool) -> float | None:
        """A stream's TTFT, or a whole answer's time (the proxy sends one at once, its first
        byte comes with the rest), for answers only: a refusal's speed says nothing."""
        answered = self.decision in ANSWERED and self.stream == stream
        return self.first_byte_s if answered else None


def decision_of(status: int, route: str | None, broken: bool = False) -> str:
    """`status` 0: no HTTP answer at all; `broken`: a stream that ended with an error event."""
    if broken or status == 0:
        return "error"
    if route == "cache":
        return "cache"
    if route and route.startswith(("local/", "cloud/")) and status < 400:
        return route.split("/", 1)[0]
    return "refused" if 400 <= status < 500 or status == 503 else "error"


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0-100); None without values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


@dataclass
class Tally:
    outcomes: list[Outcome] = field(default_factory=list)
    recent: list[float] = field(default_factory=list)  # TTFTs since the last line
    skipped: int = 0  # not sent: too many requests were still unanswered
    unanswered: int = 0  # still unanswered when the run stopped

    def add(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)
        ttft = outcome.seconds(stream=True)
        if ttft is not None:
            self.recent.append(ttft)

    def counts(self, kind: str | None = None, tenant: str | None = None) -> Counter[str]:
        return Counter(
            o.decision
            for o in self.outcomes
            if kind in (None, o.kind) and tenant in (None, o.tenant)
        )

    def seconds(self, decision: str, stream: bool) -> list[float]:
        """The TTFTs (streams) or times (whole answers) of the answers with this decision."""
        found = (o.seconds(stream) for o in self.outcomes if o.decision == decision)
        return [t for t in found if t is not None]

    def live_line(self, elapsed_s: float, in_flight: int) -> str:
        """One line a second: totals so far, and the TTFTs of the streams of the last second."""
        counts = self.counts()
        decided = "  ".join(f"{name} {counts[name]:4d}" for name in DECISIONS)
        p50, p99 = _ms(percentile(self.recent, 50)), _ms(percentile(self.recent, 99))
        self.recent = []
        ttft = f"TTFT p50 {p50}, p99 {p99}"
        return f"{elapsed_s:4.0f} s  {decided}   in flight {in_flight:3d}   {ttft}"


def final_table(tally: Tally, kinds: Sequence[str], tenants: Sequence[str]) -> str:
    """Where the requests went, all and by kind and tenant; how long they took, by decision."""
    rows = [("all", tally.counts())]
    rows += [(kind, tally.counts(kind=kind)) for kind in kinds]
    rows += [(f"tenant {tenant}", tally.counts(tenant=tenant)) for tenant in tenants]
    width = max(len(label) for label, _ in rows) + 2
    lines = [" " * width + f"{'requests':>9}" + "".join(f"{d:>9}" for d in DECISIONS)]
    for label, counts in rows:
        cells = "".join(f"{counts[d]:>9}" for d in DECISIONS)
        lines.append(f"{label:<{width}}{sum(counts.values()):>9}{cells}")
    if tally.unanswered:
        lines.append(f"unanswered when stopped: {tally.unanswered}")
    if tally.skipped:
        lines.append(f"not sent: {tally.skipped} (too many requests were still unanswered)")
    return "\n".join([*lines, "", *_timings(tally, width)])


def _timings(tally: Tally, width: int) -> list[str]:
    lines = [
        f"{'':<{width}}{'TTFT (streams)':>18}{'whole answers':>18}",
        f"{'':<{width}}" + f"{'p50':>9}{'p99':>9}" * 2,
    ]
    for decision in ANSWERED:
        cells = ""
        for stream in (True, False):
            times = tally.seconds(decision, stream)
            cells += f"{_ms(percentile(times, 50)):>9}{_ms(percentile(times, 99)):>9}"
        lines.append(f"{decision:<{width}}{cells}")
    return lines


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.0f} ms"
