"""The setting bench/cache_miss.py measures in: a cache file preloaded with stored questions
(embedded once with the serving encoder and kept under ~/.cache/overspill/bench), the proxies
that load it, and what the bench asks them (timed requests, the cache's and the engine's
counters, readiness, RSS)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import multiprocessing
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import aiohttp
import numpy as np

from bench.cache_e2e import body
from cache.index import EXACT_UP_TO
from proxy.children import Child, overspill_command, started
from proxy.home import overspill_home


def engine_args(decode_ms: float = 1.0) -> tuple[str, ...]:
    """A simulator that answers the bench's 8 tokens in about 8 decode steps of `decode_ms`."""
    return (
        *("--decode-base-ms", f"{decode_ms:g}", "--prefill-ms-per-token", "0.001"),
        *("--model", "m", "--max-seqs", "256"),
    )


ENGINE = engine_args()

# --- the cache file --------------------------------------------------------------------------


def embedded(texts: Sequence[str]) -> np.ndarray:
    """The serving encoder's vectors, computed once (in two processes) and kept on disk."""
    digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
    path = overspill_home() / "bench" / f"cache-miss-{len(texts)}-{digest}.npy"
    if path.exists():
        stored: np.ndarray = np.load(path)
        return stored
    print(f"embedding {len(texts):,} stored questions (once; kept in {path})", flush=True)
    halves = [list(texts[: len(texts) // 2]), list(texts[len(texts) // 2 :])]
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        vectors = np.concatenate(pool.map(_encode, halves))
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


def _encode(texts: list[str]) -> np.ndarray:
    from cache.embedder import load_encoder

    encoder = load_encoder("onnx", overspill_home())
    return np.concatenate([encoder.encode(texts[i : i + 256]) for i in range(0, len(texts), 256)])


def write_cache(path: Path, probe: dict[str, object], texts: Sequence[str]) -> None:
    """`texts` stored in the probe's scope and context, as a saved cache file would hold them."""
    vectors = embedded(texts) if texts else np.empty((0, 384), dtype=np.float32)
    with open(path, "wb") as out:
        out.write(b"overspill-cache 1\n")
        for text, vector in zip(texts, vectors, strict=True):
            record = {
                **probe,
                "exact": hashlib.sha256(b"bench " + text.encode()).hexdigest(),
                "query": text,
                "vector": base64.b64encode(vector.astype(np.float32).tobytes()).decode(),
            }
            out.write(json.dumps(record).encode() + b"\n")


def probe_record(engine: str, folder: Path) -> dict[str, object]:
    """One answer stored and saved by a real proxy: its scope, context, answer and times are
    what every preloaded entry gets (only the question, its key and its vector differ)."""
    path = folder / "probe.cache"
    with proxy(engine, True, path) as child:
        asyncio.run(_one(child.url, "What is a probe?"))
    lines = path.read_bytes().splitlines()
    record: dict[str, object] = json.loads(lines[-1])
    return {key: record[key] for key in ("scope", "context", "answer", "created", "expires")}


async def _one(url: str, text: str) -> None:
    async with aiohttp.ClientSession() as session:
        await timed(session, url, text)


# --- the proxies -----------------------------------------------------------------------------


@contextlib.contextmanager
def proxy(
    engine: str, semantic: bool, cache_file: Path | None = None, speculate: bool = True
) -> Iterator[Child]:
    path_line = f'path = "{cache_file}"\nsave_interval_s = 3600\n' if cache_file else ""
    config = (
        f'[[backends]]\nname = "local"\nkind = "vllm"\nurl = "{engine}"\n'
        '[server]\nlog_level = "warning"\n'
        f"[cache]\nsemantic = {str(semantic).lower()}\nttl_s = 86400\n"
        f"speculate = {str(speculate).lower()}\n"
        "semantic_unkeyed = true\n"  # its requests give no key: the anonymous scope
        "max_entries = 200000\nmax_total_entries = 200000\nmax_bytes = 1073741824\n" + path_line
    )
    with configured(config, timeout=300) as child:
        yield child


@contextlib.contextmanager
def configured(config: str, timeout: float) -> Iterator[Child]:
    """A proxy started with this configuration (TOML), written to a temporary folder."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "overspill.toml"
        path.write_text(config)
        command = overspill_command("serve", "--config", str(path), "--port", "0")
        with started(command, timeout=timeout) as child:
            yield child


async def timed(session: aiohttp.ClientSession, url: str, text: str) -> tuple[float, str]:
    start = time.perf_counter()
    async with session.post(url + "/v1/chat/completions", json=body(text)) as response:
        await response.read()
        if response.status != 200:
            raise RuntimeError(f"{url}: {response.status}")
        return time.perf_counter() - start, response.headers.get("x-overspill-cache", "")


async def get_json(session: aiohttp.ClientSession, url: str) -> dict[str, object]:
    async with session.get(url) as response:
        result: dict[str, object] = await response.json()
        return result


async def cache_status(session: aiohttp.ClientSession, url: str) -> dict[str, int]:
    return (await get_json(session, url + "/admin/status"))["cache"]  # type: ignore[return-value]


async def engine_requests(session: aiohttp.ClientSession, engine: str) -> float:
    async with session.get(engine + "/metrics") as response:
        text = await response.text()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("vllm:request_success_total{")
    )


async def ready(session: aiohttp.ClientSession, url: str, entries: int) -> None:
    """Loaded, the models warm, and the index built: a restored cache starts its build at
    once. (Waiting only for no build to run once measured a build under the first requests:
    the embedder was not ready for the warm-up lookup, so no build had started.)"""
    await timed(session, url, "How do I warm up a model?")
    for _ in range(6000):
        cache = await cache_status(session, url)
        if (
            cache["searchable"] >= entries
            and (entries <= EXACT_UP_TO or cache["indexes_approximate"])
            and cache["embedder_ready"]
            and cache["referee_ready"] is not False
            and cache.get("verifier_ready") is not False
            and not cache.get("indexes_building")
        ):
            return
        await asyncio.sleep(0.05)
    raise RuntimeError(f"{url}: the cache did not become ready")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")
