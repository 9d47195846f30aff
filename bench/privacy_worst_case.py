"""How long the detectors of personal data take, on RE2 (policies/pii.py) and, side by side, on
the lookaround patterns on Python's re that they replaced (bench/privacy_legacy.py).

    .venv/bin/python -m bench.privacy_worst_case [--sizes-mb 1,4] [--legacy-sizes-kb 16,64]
        [--budget 10]

For each detector: ordinary prose, and each adversarial family that targets its pattern (a long
run of characters the pattern accepts, with nothing that completes a match, so no detector can
stop at its first find). Columns: ms per MB on RE2 at 1 MB and at 4 MB, and how much longer the
larger text took (~4 when linear); the same for the old patterns at 16 KB and 64 KB (~16 when
quadratic), the larger size skipped ("-") when 16 times the smaller one's time would pass
--budget seconds. "found" is what the RE2 detector said at 4 MB; at the old patterns' sizes,
both must agree or the input is marked. Saves bench/results/privacy_worst_case.png: ms per MB
against text size, log-log, the slowest input of each detector (flat: linear)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from bench.privacy_legacy import LEGACY, Detector
from bench.report import plot_path, table
from policies.pii import DETECTORS
from policies.spelled import respelled

MB = 1024 * 1024

# --- inputs ----------------------------------------------------------------------------------

PROSE = (
    "The quarterly review on 2024-05-01 covered release 10.0.19041 of the build tools, the "
    "migration of 1,200 accounts to the new plan at $12.50 a month, and the 3 open questions "
    "from chapter 4. Latency stayed under 250 ms at the 99th percentile between 09:00 and 17:30; "
    "the team will meet again in room 12B on the 3rd floor. Version 2.3.1 fixed the retry loop "
    "(issue #4521), and page 12 of 345 of the manual now explains the 16:9 layout. "
)

# detector -> (family, the unit repeated to fill the text)
FAMILIES: dict[str, tuple[tuple[str, str], ...]] = {
    "email": (
        ("letters", "a"),
        ("digits", "1"),
        ("@ alone", "@"),
        ("a@", "a@"),
        ("a.", "a."),
        ("a@a.", "a@a."),
    ),
    "phone": (
        ("digits", "1"),
        ("digit space", "1 "),
        ("digit dot", "1."),
        ("digit dash", "1-"),
        ("(digit)", "(1)"),
        ("+digit", "+1"),
        ("short +groups", "+1 23 45 "),
        ("bad IPv4", "999.1.1.1 "),
        ("times", "12:30:45 "),
    ),
    "payment_card": (
        ("digits", "1"),
        ("digit space", "1 "),
        ("digit dash", "1-"),
        ("Luhn-invalid", "4111 1111 1111 1112 "),
    ),
    "us_ssn": (("digits", "1"), ("digit dash", "1-"), ("never issued", "000-00-0000 ")),
    "iban": (("upper+digit", "A1"), ("letters", "A"), ("AB12", "AB12"), ("AB12 space", "AB12 ")),
    "ip_address": (
        ("digit dot", "1."),
        ("hex colon", "a:"),
        ("colons", ":"),
        ("bad IPv4", "999.1.1.1 "),
        ("times", "12:30:45 "),
        ("1:::1", "1:::1 "),
    ),
}


# The scan also reads a text again with what is spelled out written as such
# (policies/spelled.py): its own row, on inputs made to keep its patterns busy.
SPELLED = "spelled-out reading"
FAMILIES[SPELLED] = tuple(
    (unit.strip() or unit, unit)
    for unit in (
        *("at at at dot dot ", "x at x dot x at ", "a [at] b [dot] ", "x @ "),
        *("a.b.c.d.e.f.g.h at ", "one two three ", "one zwei ", "double ", "oh ", "five, "),
        *("一二三四", "이 일 사 ", "a艾特b点"),
    )
)
FAMILIES["secret"] = (("labels", "password: "), ("label and value", "Passwort: ab12 "))
FAMILIES["record_number"] = (("labels", "NHC: "), ("label and digits", "NHC: 1 "))
FAMILIES["device_id"] = (("hex colon", "0a:"), ("IMEI labels", "IMEI 1 "))
FAMILIES["street_address"] = (("labels", "Address: "), ("number street", "1 Street "))
SCANNED: dict[str, Detector] = {**DETECTORS, SPELLED: lambda text: respelled(text) is not None}


def filled(unit: str, size: int) -> str:
    """Whole units only: a unit cut short could complete a match ("1:::1" -> "1::")."""
    return unit * (size // len(unit))


# --- the run ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    detector: str
    family: str
    found: bool
    new_s: tuple[float, float]  # RE2, at the two sizes
    old_s: tuple[float | None, float | None]  # Python's re; None: skipped


def seconds(detector: Detector, text: str, repeat: int) -> tuple[float, bool]:
    """The best of `repeat` runs, or of as many as fit in half a second when they are quick."""
    best, found, spent, runs = float("inf"), False, 0.0, 0
    while runs < repeat or (spent < 0.5 and runs < 20):
        started = time.perf_counter()
        found = detector(text)
        took = time.perf_counter() - started
        best, spent, runs = min(best, took), spent + took, runs + 1
    return best, found


def measure(
    name: str,
    family: str,
    unit: str,
    sizes: Sequence[int],
    legacy_sizes: Sequence[int],
    budget: float,
) -> Row:
    (small, _), (large, found) = (seconds(SCANNED[name], filled(unit, n), 2) for n in sizes)
    old_s: list[float | None] = [None, None]
    for i, size in enumerate(legacy_sizes if name in LEGACY else ()):
        if i and (old_s[0] or 0) * (size / legacy_sizes[0]) ** 2 > budget:
            break
        old_s[i], old_found = seconds(LEGACY[name], filled(unit, size), 1)
        if old_found != DETECTORS[name](filled(unit, size)):
            family += f" (old and new disagree at {size} characters!)"
    return Row(name, family, found, (small, large), (old_s[0], old_s[1]))


def rows(sizes: Sequence[int], legacy_sizes: Sequence[int], budget: float) -> list[Row]:
    return [
        measure(name, family, unit, sizes, legacy_sizes, budget)
        for name in SCANNED
        for family, unit in (("prose", PROSE), *FAMILIES.get(name, ()))
    ]


def render(results: Sequence[Row], sizes: Sequence[int], legacy_sizes: Sequence[int]) -> str:
    mb = [f"{n / MB:.3g} MB" for n in sizes]
    kb = [f"{n // 1024} KB" for n in legacy_sizes]
    headers = [
        "detector",
        "input",
        "found",
        *(f"RE2 ms/MB {size}" for size in mb),
        f"RE2 x time {mb[1]}/{mb[0]}",
        *(f"re ms/MB {size}" for size in kb),
        f"re x time {kb[1]}/{kb[0]}",
    ]
    return table(headers, [_cells(row, sizes, legacy_sizes) for row in results])


def _cells(row: Row, sizes: Sequence[int], legacy_sizes: Sequence[int]) -> list[object]:
    new, old = _per_mb(sizes, row.new_s)[1], _per_mb(legacy_sizes, row.old_s)[1]
    old_small, old_large = row.old_s
    growth = "-" if old_small is None or old_large is None else old_large / old_small
    found = "yes" if row.found else "no"
    return [
        row.detector,
        row.family,
        found,
        *new,
        row.new_s[1] / row.new_s[0],
        *old,
        *["-"] * (2 - len(old)),
        growth,
    ]


def plot(results: Sequence[Row], sizes: Sequence[int], legacy_sizes: Sequence[int]) -> None:
    """Time per MB against text size, slowest input per detector: flat when linear."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for i, name in enumerate(SCANNED):
        mine = [row for row in results if row.detector == name]
        new = max(mine, key=lambda row: row.new_s[1])
        ax.loglog(*_per_mb(sizes, new.new_s), f"C{i}o-", label=f"{name}, RE2: {new.family}")
        old = max(mine, key=lambda row: row.old_s[0] or 0)
        ax.loglog(*_per_mb(legacy_sizes, old.old_s), f"C{i}s--", label=f"{name}, re: {old.family}")
    ax.set_xlabel("text, characters")
    ax.set_ylabel("ms per MB (slowest input per detector)")
    ax.set_title("detectors of personal data: RE2 (solid) and the old lookarounds (dashed)")
    ax.legend(fontsize=6, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.15))
    fig.tight_layout()
    path = plot_path("privacy_worst_case")
    fig.savefig(path, dpi=120)
    print(f"\nplot: {path}")


def _per_mb(sizes: Sequence[int], times: Sequence[float | None]) -> tuple[list[int], list[float]]:
    """The sizes that ran, and their ms per MB."""
    ran = [(n, t) for n, t in zip(sizes, times, strict=True) if t is not None]
    return [n for n, _ in ran], [1000 * t / (n / MB) for n, t in ran]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes-mb", default="1,4", help="two text sizes for RE2, MB")
    parser.add_argument("--legacy-sizes-kb", default="16,64", help="two sizes for Python's re")
    parser.add_argument("--budget", type=float, default=10.0, help="longest old run, seconds")
    args = parser.parse_args(argv)
    sizes = [int(float(n) * MB) for n in args.sizes_mb.split(",")]
    legacy_sizes = [int(float(n) * 1024) for n in args.legacy_sizes_kb.split(",")]
    results = rows(sizes, legacy_sizes, args.budget)
    print(render(results, sizes, legacy_sizes))
    plot(results, sizes, legacy_sizes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
