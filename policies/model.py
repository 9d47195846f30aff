"""What the admin's TOML file says, as frozen, validated objects (built by policies/loader.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

BackendKind = Literal["vllm", "ollama", "openai"]
BACKEND_KINDS: tuple[BackendKind, ...] = ("vllm", "ollama", "openai")


@dataclass(frozen=True)
class Server:
    host: str = "127.0.0.1"
    port: int = 8080
    max_body_bytes: int = 4 * 1024 * 1024
    probe_interval_s: float = 1.0
    log_level: str = "info"


@dataclass(frozen=True)
class Timeouts:
    connect_s: float = 2.0
    first_byte_s: float = 60.0  # streamed requests: until the first chunk of the body
    idle_s: float = 60.0  # streamed requests: the longest silence between two chunks
    total_s: float = 600.0  # any request, first byte to last


@dataclass(frozen=True)
class Backend:
    name: str
    kind: BackendKind
    url: str
    # Public model name -> the engine's own name; None: discover from the engine's /v1/models.
    models: Mapping[str, str] | None = None
    max_concurrency: int | None = None
    api_key_env: str | None = None

    @property
    def discovers_models(self) -> bool:
        return self.models is None


@dataclass(frozen=True)
class Policy:
    server: Server = field(default_factory=Server)
    timeouts: Timeouts = field(default_factory=Timeouts)
    backends: tuple[Backend, ...] = ()
    source: str = "<defaults>"  # the file it was read from, for messages

    def backend(self, name: str) -> Backend:
        return next(b for b in self.backends if b.name == name)
