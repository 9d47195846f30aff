"""Which engine serves a model: one shared engine (vLLM, cloud) or one per loaded model (Ollama).

Ollama keeps at most `max_loaded` models in memory. A request for a model that is not loaded
waits for it to load (`load_ms`), evicting the least recently used idle model first; a loaded
model stays until `keep_alive` after its last use.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from proxy.errors import ModelNotFound
from proxy.sim.engine import Engine
from proxy.sim.profile import EngineProfile

# How often a load that must evict re-checks for an idle model (rare: every slot busy).
_EVICTION_POLL_S = 0.01


class ModelHost(Protocol):
    names: tuple[str, ...]

    async def acquire(self, model: str, keep_alive_s: float | None = None) -> Engine: ...

    def release(self, model: str) -> None: ...

    def engines(self) -> dict[str, Engine]: ...

    async def stop(self) -> None: ...


def unknown_model(model: str, names: tuple[str, ...]) -> ModelNotFound:
    return ModelNotFound(
        f"The model `{model}` does not exist. Available: {', '.join(names)}", param="model"
    )


class SharedEngine:
    """vLLM and cloud: every served name is one engine (vLLM's served-model-name aliases)."""

    def __init__(self, names: tuple[str, ...], engine: Engine) -> None:
        self.names = names
        self.engine = engine
        self._task = asyncio.get_running_loop().create_task(engine.run())

    async def acquire(self, model: str, keep_alive_s: float | None = None) -> Engine:
        if model not in self.names:
            raise unknown_model(model, self.names)
        return self.engine

    def release(self, model: str) -> None:
        pass

    def engines(self) -> dict[str, Engine]:
        return {self.names[0]: self.engine}

    async def stop(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


@dataclass
class LoadedModel:
    engine: Engine
    task: asyncio.Task[None]
    loaded_at: float
    expires_at: float
    active: int = 0


class OllamaModels:
    def __init__(
        self, names: tuple[str, ...], profile: EngineProfile, clock: Callable[[], float]
    ) -> None:
        self.names = names
        self.profile = profile
        self.clock = clock
        self.loaded: OrderedDict[str, LoadedModel] = OrderedDict()
        self._loading: dict[str, asyncio.Task[LoadedModel]] = {}
        self._claimed = 0  # loads in progress that already made room for themselves
        self.loads = 0

    async def acquire(self, model: str, keep_alive_s: float | None = None) -> Engine:
        if model not in self.names:
            raise unknown_model(model, self.names)
        self._unload_expired()
        entry = self.loaded.get(model)
        if entry is None:
            task = self._loading.get(model)
            if task is None:
                task = asyncio.get_running_loop().create_task(self._load(model))
                self._loading[model] = task
            entry = await asyncio.shield(task)
        self.loaded.move_to_end(model)
        entry.active += 1
        keep = self.profile.keep_alive_s if keep_alive_s is None else keep_alive_s
        entry.expires_at = float("inf") if keep < 0 else self.clock() + keep
        return entry.engine

    def release(self, model: str) -> None:
        entry = self.loaded.get(model)
        if entry is not None:
            entry.active -= 1
            keep = entry.expires_at - self.clock()
            if keep <= 0 and entry.active == 0:
                self._unload(model)

    def engines(self) -> dict[str, Engine]:
        return {name: entry.engine for name, entry in self.loaded.items()}

    def is_loading(self, model: str) -> bool:
        return model in self._loading

    async def stop(self) -> None:
        for task in self._loading.values():
            task.cancel()
        for name in list(self.loaded):
            self._unload(name)

    async def _load(self, model: str) -> LoadedModel:
        try:
            while len(self.loaded) + self._claimed >= self.profile.max_loaded:
                if not self._evict_one():
                    await asyncio.sleep(_EVICTION_POLL_S)
            self._claimed += 1
            try:
                await asyncio.sleep(self.profile.load_ms / 1000)
            finally:
                self._claimed -= 1
            engine = Engine(self.profile, self.clock, name=model)
            task = asyncio.get_running_loop().create_task(engine.run())
            now = self.clock()
            entry = LoadedModel(engine, task, loaded_at=now, expires_at=now)
            self.loaded[model] = entry
            self.loads += 1
            return entry
        finally:
            del self._loading[model]

    def _evict_one(self) -> bool:
        for name, entry in self.loaded.items():  # least recently used first
            if entry.active == 0:
                self._unload(name)
                return True
        return False

    def _unload_expired(self) -> None:
        now = self.clock()
        for name in [n for n, e in self.loaded.items() if e.active == 0 and e.expires_at <= now]:
            self._unload(name)

    def _unload(self, model: str) -> None:
        entry = self.loaded.pop(model)
        entry.task.cancel()
