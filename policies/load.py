"""What the proxy knows about each backend's health and load at one instant (frozen snapshots)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from policies.model import BackendKind


@dataclass(frozen=True)
class BackendLoad:
    name: str
    kind: BackendKind
    healthy: bool
    models: Mapping[str, str]  # public name -> engine's name, configured or discovered
    in_flight: int = 0  # requests this proxy has sent and not yet finished
    running: int | None = None  # engine-reported (vLLM /metrics)
    waiting: int | None = None  # engine-reported (vLLM /metrics)
    kv_cache_usage: float | None = None  # engine-reported (vLLM /metrics)
    loaded_models: frozenset[str] | None = None  # engine-reported (Ollama /api/ps)
    error: str | None = None  # why it is unhealthy
    token_rate: float | None = None  # tokens/s it has shown it can process (prompt + output)
    mean_request_tokens: float | None = None  # prompt + max_tokens of the requests it serves

    @property
    def outstanding(self) -> int:
        """Least-outstanding-work score: our in-flight requests plus the engine's queue."""
        return self.in_flight + (self.waiting or 0)

    def has_loaded(self, upstream_model: str) -> bool | None:
        """Whether the engine holds the model in memory; None when it does not say."""
        if self.loaded_models is None:
            return None
        return upstream_model in self.loaded_models


@dataclass(frozen=True)
class LoadSnapshot:
    backends: tuple[BackendLoad, ...] = field(default_factory=tuple)

    def serving(self, model: str) -> list[BackendLoad]:
        return [b for b in self.backends if model in b.models]

    def public_models(self) -> list[str]:
        return sorted({name for b in self.backends for name in b.models})
