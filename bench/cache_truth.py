"""Does the semantic cache answer only the questions it was asked? Labelled pairs through the
real proxy, the guard alone beside the answer verifier (issue 18).

One fast simulator behind two proxies, identical but for `[cache] verifier`: off (the threshold
0.90 and the guard decide) and on (the defaults: candidates from 0.70, the verifier decides).
Each pair gets a conversation of its own (a system message naming it), so pairs never meet in
the cache. First every `a` is asked (a miss: its answer is stored); once all are searchable and
the models loaded, every `b` is asked, one at a time: `x-overspill-cache: hit-semantic` on a
paraphrase is a hit, on a near-miss a wrong answer. Speculation is off: the cache's decisions are
measured, not which of the engine and the verifier finishes first.

Reported per file (and split): recall, wrong hits, what a `b` lookup costs (client p50 and p99,
hits and misses apart, the proxy's CPU per lookup), and, as proof of what was measured, that the
engine received exactly the `b` requests the proxy did not answer from the cache.

    .venv/bin/python -m bench.cache_truth [--split held_out] [--fresh] [--typos]

`--typos` adds each set again with every `b` as typed in a hurry (lower case, two words with a
letter dropped or swapped): a near-miss typed so is still another question, and a verifier
that took typos for a sign of a paraphrase would serve it.

The verifier never saw cache_truth_pairs.jsonl's held-out half, nor cache_truth_fresh.jsonl
(written apart, committed before the first measurement on it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from bench.cache_e2e import pct
from bench.cache_miss_setup import ENGINE, cache_status, configured, engine_requests
from bench.loadgen import cpu_seconds
from bench.report import RESULTS, plot_path, table
from proxy.children import Child, overspill_command, started

DATA = Path(__file__).resolve().parent / "data"
SETTINGS = {"guard only": "verifier = false\n", "verifier": ""}


@dataclass
class Outcome:
    row: dict[str, str]
    status: str
    seconds: float

    @property
    def served(self) -> bool:
        return self.status == "hit-semantic"

    @property
    def paraphrase(self) -> bool:
        return self.row["label"] == "paraphrase"


@dataclass
class Result:
    data: str
    setting: str
    recall: tuple[int, int]
    wrong: tuple[int, int]
    hit_ms: tuple[float, float]  # p50, p99
    miss_ms: tuple[float, float]
    cpu_ms: float  # the proxy's, per b lookup
    forwarded: int  # b requests the engine received
    verified: int = 0
    kinds: dict[str, tuple[int, int]] = field(default_factory=dict)  # served / pairs


def mistyped(text: str, rng: random.Random) -> str:
    """As typed in a hurry: lower case, no closing mark, and in two words of five letters or
    more one letter dropped or two swapped (not the first or last letter)."""
    words = text.lower().rstrip("?.!").split()
    long = [at for at, word in enumerate(words) if len(word) >= 5 and word.isalpha()]
    for at in rng.sample(long, min(2, len(long))):
        word, cut = words[at], rng.randrange(1, len(words[at]) - 2)
        dropped = word[:cut] + word[cut + 1 :]
        swapped = word[:cut] + word[cut + 1] + word[cut] + word[cut + 2 :]
        words[at] = rng.choice((dropped, swapped))
    return " ".join(words)


def with_typos(rows: Sequence[dict[str, str]], seed: int = 7) -> list[dict[str, str]]:
    """Each pair with its `b` mistyped, in a conversation of its own: a paraphrase typed so is
    still the same question, a near-miss still another."""
    rng = random.Random(seed)
    return [{**row, "id": f"{row['id']}-typos", "b": mistyped(row["b"], rng)} for row in rows]


def rows_of(path: Path, split: str | None) -> list[dict[str, str]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if split is None or r.get("split") == split]


@contextlib.contextmanager
def proxy(engine: str, cache_lines: str) -> Iterator[Child]:
    config = (
        f'[[backends]]\nname = "local"\nkind = "vllm"\nurl = "{engine}"\n'
        '[server]\nlog_level = "warning"\n'
        # what the cache decides: with speculation, this fast simulator's answer would come
        # before some verdicts, and a hit it beats is served the engine's answer instead
        # (its requests name no tenant and give no key: the anonymous scope shares them)
        f"[cache]\nttl_s = 86400\nspeculate = false\nsemantic_unkeyed = true\n{cache_lines}"
    )
    with configured(config, timeout=900) as child:
        yield child


def body(row: dict[str, str], question: str) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [
            {"role": "system", "content": f"Conversation {row['id']}."},
            {"role": "user", "content": question},
        ],
        "temperature": 0,
        "max_tokens": 8,
    }


async def ask(
    session: aiohttp.ClientSession, url: str, row: dict[str, str], question: str
) -> tuple[float, str]:
    start = time.perf_counter()
    async with session.post(url + "/v1/chat/completions", json=body(row, question)) as response:
        await response.read()
        if response.status != 200:
            raise RuntimeError(f"{url}: {response.status}")
        return time.perf_counter() - start, response.headers.get("x-overspill-cache", "")


async def settled(session: aiohttp.ClientSession, url: str, entries: int) -> None:
    """Every stored question searchable, the models loaded (the verifier made first, if this
    home has none: minutes)."""
    for _ in range(20_000):
        cache = await cache_status(session, url)
        loaded = cache["embedder_ready"] and cache.get("verifier_ready") is not False
        if cache["searchable"] >= entries and loaded and cache["referee_ready"] is not False:
            return
        await asyncio.sleep(0.05)
    raise RuntimeError(f"{url}: the cache did not settle")


async def measure(
    url: str, pid: int, engine: str, rows: Sequence[dict[str, str]]
) -> tuple[list[Outcome], float, int, int]:
    async with aiohttp.ClientSession() as session:
        limit = asyncio.Semaphore(8)

        async def store(row: dict[str, str]) -> None:
            async with limit:
                await ask(session, url, row, row["a"])

        await asyncio.gather(*(store(row) for row in rows))
        await settled(session, url, len(rows))
        verified = (await cache_status(session, url)).get("verified", 0)
        received, cpu = await engine_requests(session, engine), cpu_seconds(pid)
        outcomes = []
        for row in rows:
            seconds, status = await ask(session, url, row, row["b"])
            outcomes.append(Outcome(row, status, seconds))
        cpu = cpu_seconds(pid) - cpu
        forwarded = int(await engine_requests(session, engine) - received)
        verified = (await cache_status(session, url)).get("verified", 0) - verified
    return outcomes, cpu, forwarded, verified


def result(
    data: str, setting: str, outcomes: list[Outcome], cpu: float, forwarded: int, verified: int
) -> Result:
    paraphrases = [o for o in outcomes if o.paraphrase]
    near = [o for o in outcomes if not o.paraphrase]
    hits = [o.seconds for o in outcomes if o.served] or [float("nan")]
    misses = [o.seconds for o in outcomes if not o.served] or [float("nan")]
    kinds: dict[str, tuple[int, int]] = {}
    for o in outcomes:
        served, total = kinds.get(o.row["kind"], (0, 0))
        kinds[o.row["kind"]] = (served + o.served, total + 1)
    return Result(
        data,
        setting,
        (sum(o.served for o in paraphrases), len(paraphrases)),
        (sum(o.served for o in near), len(near)),
        (pct(hits, 0.5), pct(hits, 0.99)),
        (pct(misses, 0.5), pct(misses, 0.99)),
        1000 * cpu / len(outcomes),
        forwarded,
        verified,
        kinds,
    )


def run(sets: dict[str, list[dict[str, str]]], settings: dict[str, str]) -> list[Result]:
    results = []
    with started(overspill_command("sim", "--port", "0", *ENGINE)) as engine:
        for setting, lines in settings.items():
            with proxy(engine.url, lines) as child:
                for name, rows in sets.items():
                    outcomes, cpu, forwarded, verified = asyncio.run(
                        measure(child.url, child.popen.pid, engine.url, rows)
                    )
                    misses = sum(not o.served for o in outcomes)
                    if forwarded != misses:  # the figures would not be what they claim
                        raise RuntimeError(f"engine got {forwarded} b requests, {misses} missed")
                    results.append(result(name, setting, outcomes, cpu, forwarded, verified))
                    print(f"{name}, {setting}: done", flush=True)
    return results


def report(results: list[Result]) -> str:
    headers = (
        "pairs", "cache", "recall", "wrong hits", "hit p50/p99 ms", "miss p50/p99 ms",
        "CPU ms/lookup", "verifier reads",
    )  # fmt: skip
    rows = [
        (
            r.data,
            r.setting,
            f"{r.recall[0]}/{r.recall[1]} ({100 * r.recall[0] / r.recall[1]:.1f}%)",
            f"{r.wrong[0]}/{r.wrong[1]}",
            f"{r.hit_ms[0]:.1f} / {r.hit_ms[1]:.1f}",
            f"{r.miss_ms[0]:.1f} / {r.miss_ms[1]:.1f}",
            f"{r.cpu_ms:.1f}",
            r.verified,
        )
        for r in results
    ]
    kinds = sorted({kind for r in results for kind in r.kinds})
    by_kind = [
        (kind, *(_share(r.kinds.get(kind)) for r in results)) for kind in kinds
    ]  # fmt: skip
    names = [f"{r.data}: {r.setting}" for r in results]
    return (
        table(headers, rows)
        + "\n\nserved, by kind (a paraphrase kind: recall; a near-miss kind: wrong hits)\n"
        + table(("kind", *names), by_kind)
    )


def _share(counts: tuple[int, int] | None) -> str:
    return "" if counts is None else f"{counts[0]}/{counts[1]}"


def plot(results: list[Result]) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    labels = [f"{r.data}\n{r.setting}" for r in results]
    left.bar(labels, [100 * r.recall[0] / r.recall[1] for r in results], color="tab:green")
    left.axhline(70, color="grey", linestyle="--", linewidth=1)
    left.set_ylabel("paraphrases served (%)")
    right.bar(labels, [100 * r.wrong[0] / r.wrong[1] for r in results], color="tab:red")
    right.set_ylabel("near-misses served: wrong answers (%)")
    for axis in (left, right):
        axis.tick_params(axis="x", labelsize=7)
    figure.suptitle("Semantic cache through the proxy: the guard alone vs the answer verifier")
    figure.tight_layout()
    path = plot_path("cache_truth")
    figure.savefig(path, dpi=110)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", default="held_out", help="of cache_truth_pairs.jsonl")
    parser.add_argument("--fresh", action="store_true", help="also cache_truth_fresh.jsonl")
    parser.add_argument("--threshold", type=float, help="the verifier's (default: the policy's)")
    parser.add_argument("--typos", action="store_true", help="also each set with `b` mistyped")
    args = parser.parse_args(argv)
    settings = dict(SETTINGS)
    if args.threshold is not None:
        settings["verifier"] += f"threshold = {args.threshold}\n"
    sets = {f"{args.split} half": rows_of(DATA / "cache_truth_pairs.jsonl", args.split)}
    if args.fresh:
        sets["fresh set"] = rows_of(DATA / "cache_truth_fresh.jsonl", None)
    if args.typos:
        sets |= {f"{name}, typos": with_typos(rows) for name, rows in sets.items()}
    results = run(sets, settings)
    print(report(results))
    RESULTS.mkdir(parents=True, exist_ok=True)
    saved = RESULTS / "cache_truth.json"
    saved.write_text(json.dumps([asdict(r) for r in results], indent=1) + "\n")
    print(f"\nsaved {saved}; plot: {plot(results)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
