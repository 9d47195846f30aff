"""The backend registry: a probe per backend reads health, models and load in the background.

- vllm: `/health`, then `/metrics` (`num_requests_running`, `num_requests_waiting`,
  `kv_cache_usage_perc`, or the older `gpu_cache_usage_perc`); models from `/v1/models`.
- ollama: `/api/ps` (alive, and which models are in memory); models from `/api/tags`. Ollama has
  no metrics, so for it the proxy's own in-flight count is the whole load picture.
- openai (any OpenAI-compatible server): `/v1/models`, which also lists its models.

A request that cannot connect marks its backend down at once; the next good probe brings it back.
A probe that times out does so only the third time in a row: a busy engine answers late.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import orjson

from policies.load import BackendLoad, LoadSnapshot
from policies.model import Backend
from proxy.errors import UpstreamError, UpstreamTimeout
from proxy.legs.promtext import sample_values
from proxy.legs.upstream import EngineClient

log = logging.getLogger("overspill.backends")
# Probes in a row that may time out before a healthy backend counts as down (a backend not yet
# up stays down at the first).
SLOW_PROBES_TO_DOWN = 3

_VLLM_GAUGES = {
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
}


@dataclass
class TokenMeter:
    """How many tokens/s a backend has shown it can process: the best rate seen over a window
    while it was kept busy, slowly forgotten. Rates measured while it idled say nothing about
    its capacity, so they never lower the estimate by themselves."""

    window_s: float = 5.0
    decay_per_window: float = 0.9
    started: float | None = None
    tokens: int = 0
    busy: bool = False
    capacity: float | None = None

    def add(self, now: float, tokens: int, busy: bool) -> None:
        if self.started is None:
            self.started = now
        self.tokens += tokens
        self.busy = self.busy or busy
        elapsed = now - self.started
        if elapsed >= self.window_s:
            rate = self.tokens / elapsed
            remembered = (self.capacity or 0.0) * self.decay_per_window
            self.capacity = max(rate, remembered) if self.busy else (self.capacity or None)
            self.started, self.tokens, self.busy = now, 0, False


@dataclass
class BackendMonitor:
    config: Backend
    healthy: bool = False
    error: str | None = "not probed yet"
    discovered: dict[str, str] = field(default_factory=dict)
    in_flight: int = 0
    running: int | None = None
    waiting: int | None = None
    kv_cache_usage: float | None = None
    loaded_models: frozenset[str] | None = None
    probes: int = 0
    work_in_flight: int = 0  # estimated tokens of the requests in flight here
    slow_probes: int = 0  # probes in a row that timed out
    meter: TokenMeter = field(default_factory=lambda: TokenMeter())

    @property
    def models(self) -> dict[str, str]:
        configured = self.config.models
        return dict(configured) if configured is not None else self.discovered

    def lists(self, model: str) -> bool:
        configured = self.config.models
        return model in (configured if configured is not None else self.discovered)

    def view(self) -> BackendLoad:
        return BackendLoad(
            name=self.config.name,
            kind=self.config.kind,
            healthy=self.healthy,
            models=self.models,
            in_flight=self.in_flight,
            running=self.running,
            waiting=self.waiting,
            kv_cache_usage=self.kv_cache_usage,
            loaded_models=self.loaded_models,
            error=None if self.healthy else self.error,
            token_rate=self.meter.capacity,
            mean_request_tokens=self.work_in_flight / self.in_flight if self.in_flight else None,
        )

    def mark_down(self, error: str, detail: str = "") -> None:
        """Down, for `error` (the proxy's words: requests' reasons show it); what the engine or
        the OS said (`detail`) goes to the log only."""
        if self.healthy:
            said = f" ({detail})" if detail else ""
            log.warning("backend %s marked down: %s%s", self.config.name, error, said)
        self.healthy = False
        self.error = error


@dataclass
class InFlight:
    """A request counted in flight at a backend while the block runs (a class, not a
    generator: entered once per request)."""

    monitor: BackendMonitor
    tokens: int
    on_free: Callable[[], None]

    def __enter__(self) -> None:
        self.monitor.in_flight += 1
        self.monitor.work_in_flight += self.tokens

    def __exit__(self, *exc: object) -> None:
        monitor = self.monitor
        monitor.in_flight -= 1
        monitor.work_in_flight -= self.tokens
        monitor.meter.add(time.monotonic(), self.tokens, busy=monitor.in_flight > 0)
        self.on_free()


class Backends:
    def __init__(
        self, configs: tuple[Backend, ...], upstream: EngineClient, interval: float
    ) -> None:
        self.monitors = {config.name: BackendMonitor(config) for config in configs}
        self.upstream = upstream
        self.interval = interval
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self.on_free: Callable[[], None] = lambda: None  # a request left a backend

    async def start(self) -> None:
        """Probe everything once (so the first requests see real state), then keep probing."""
        await asyncio.gather(*(self.probe(m) for m in self.monitors.values()))
        for monitor in self.monitors.values():
            self._watch(monitor, probe_first=False)

    def reconfigure(self, configs: tuple[Backend, ...], interval: float) -> None:
        """A new policy's backends: unchanged ones keep their state and counters, new or changed
        ones start probing at once, removed ones stop (requests still using them finish)."""
        kept = {name: m for name, m in self.monitors.items() if m.config in configs}
        self.monitors = {c.name: kept.get(c.name) or BackendMonitor(c) for c in configs}
        self.interval = interval
        live = {id(m) for m in self.monitors.values()}
        for key in [key for key in self._tasks if key not in live]:
            self._tasks.pop(key).cancel()
        for monitor in self.monitors.values():
            if id(monitor) not in self._tasks:
                self._watch(monitor, probe_first=True)

    def _watch(self, monitor: BackendMonitor, probe_first: bool) -> None:
        task = asyncio.get_running_loop().create_task(self._probe_forever(monitor, probe_first))
        self._tasks[id(monitor)] = task

    async def stop(self) -> None:
        for task in self._tasks.values():
            task.cancel()
        for task in self._tasks.values():
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def snapshot(self) -> LoadSnapshot:
        return LoadSnapshot(tuple(m.view() for m in self.monitors.values()))

    def lists(self, model: str) -> bool:
        """Whether a backend lists the model now (snapshot().serving(model), without building
        a snapshot: asked once per request)."""
        return any(m.lists(model) for m in self.monitors.values())

    def __getitem__(self, name: str) -> BackendMonitor:
        return self.monitors[name]

    def in_flight(self, name: str, tokens: int = 0) -> InFlight:
        """Count a request (and its estimated work in tokens) as in flight at `name`."""
        return InFlight(self.monitors[name], tokens, self.on_free)

    async def _probe_forever(self, monitor: BackendMonitor, probe_first: bool) -> None:
        if probe_first:
            await self.probe(monitor)
        while True:
            await asyncio.sleep(self.interval)
            await self.probe(monitor)

    async def probe(self, monitor: BackendMonitor) -> None:
        was = monitor.healthy
        try:
            await _PROBES[monitor.config.kind](self, monitor)
        except UpstreamTimeout as exc:
            # An engine at peak load may answer its probe late: that alone is no reason to send
            # its traffic elsewhere. Down once it stays silent; one that refuses is down at once.
            monitor.slow_probes += 1
            if monitor.slow_probes >= SLOW_PROBES_TO_DOWN or not was:
                monitor.mark_down(exc.message, exc.detail)
        except UpstreamError as exc:
            monitor.mark_down(exc.message, exc.detail)
        except ValueError as exc:  # an answer that does not read as its format
            monitor.mark_down(f"probe answer unreadable ({type(exc).__name__})", str(exc)[:500])
        else:
            monitor.healthy, monitor.error, monitor.slow_probes = True, None, 0
            if not was:
                log.info("backend %s is up", monitor.config.name)
        monitor.probes += 1

    async def _get(self, monitor: BackendMonitor, path: str) -> bytes:
        status, body = await self.upstream.get(monitor.config.url + path, self._probe_timeout)
        if status != 200:
            raise UpstreamError(f"{path} answered {status}")
        return body

    @property
    def _probe_timeout(self) -> float:
        return max(0.5, min(self.interval, self.upstream.timeouts.connect_s * 2))

    async def _probe_vllm(self, monitor: BackendMonitor) -> None:
        await self._get(monitor, "/health")
        values = sample_values((await self._get(monitor, "/metrics")).decode(), _VLLM_GAUGES)
        monitor.running = _sum(values.get("vllm:num_requests_running"))
        monitor.waiting = _sum(values.get("vllm:num_requests_waiting"))
        usage = values.get("vllm:kv_cache_usage_perc") or values.get("vllm:gpu_cache_usage_perc")
        monitor.kv_cache_usage = max(usage) if usage else None
        if monitor.config.discovers_models:
            await self._discover_openai(monitor)

    async def _probe_ollama(self, monitor: BackendMonitor) -> None:
        ps = orjson.loads(await self._get(monitor, "/api/ps"))
        monitor.loaded_models = frozenset(m.get("model") or m["name"] for m in ps["models"])
        if monitor.config.discovers_models:
            tags = orjson.loads(await self._get(monitor, "/api/tags"))
            monitor.discovered = {m["name"]: m["name"] for m in tags["models"]}

    async def _probe_openai(self, monitor: BackendMonitor) -> None:
        await self._discover_openai(monitor)

    async def _discover_openai(self, monitor: BackendMonitor) -> None:
        listing = orjson.loads(await self._get(monitor, "/v1/models"))
        if monitor.config.discovers_models:
            monitor.discovered = {m["id"]: m["id"] for m in listing["data"]}


def _sum(values: list[float] | None) -> int | None:
    return None if values is None else int(sum(values))


_PROBES = {
    "vllm": Backends._probe_vllm,
    "ollama": Backends._probe_ollama,
    "openai": Backends._probe_openai,
}
