"""The simulator's timing and capacity model: one frozen `EngineProfile` per personality.

Defaults resemble a Llama-3-8B class model in 16-bit on one 80 GB data-centre GPU served by vLLM
(see docs/simulator.md for how each figure was derived). Profiles are overridden by a TOML file
(`--profile`, also what `--calibrate` writes) and then by command-line flags.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

Personality = Literal["vllm", "ollama", "cloud"]
PERSONALITIES: tuple[Personality, ...] = ("vllm", "ollama", "cloud")
# "echo": the answer repeats the request's last message (tests of what passes through a proxy)
OutputDistribution = Literal["fixed", "uniform", "exponential", "echo"]


class ProfileError(ValueError):
    """A profile file or flag that cannot be used; the message names the key."""


@dataclass(frozen=True)
class EngineProfile:
    # Continuous batching: at most max_seqs sequences decode together, one token each per step.
    max_seqs: int = 256
    decode_base_ms: float = 12.0
    decode_per_seq_ms: float = 0.25
    # Prefill: per prompt token not found in the prefix cache; chunked to max_batched_tokens.
    prefill_ms_per_token: float = 0.08
    max_batched_tokens: int = 8192
    # Paged KV cache with automatic prefix caching.
    kv_tokens: int = 400_000
    block_size: int = 16
    max_model_len: int = 8192
    # Output length when the request gives no max_tokens.
    output_tokens: int = 128
    output_distribution: OutputDistribution = "uniform"
    # Admission: requests beyond this many waiting get 503 (None: unbounded, as vLLM).
    max_waiting: int | None = None
    max_body_bytes: int = 8 * 1024 * 1024
    # Ollama: cold-load cost and how many models stay resident; keep_alive default.
    load_ms: float = 0.0
    max_loaded: int = 1
    keep_alive_s: float = 300.0
    # Cloud: fixed network latency before the first byte; optional requests-per-minute limit.
    network_latency_ms: float = 0.0
    rate_limit_rpm: int | None = None
    # Embeddings returned by /v1/embeddings.
    embedding_dim: int = 384

    def __post_init__(self) -> None:
        problems = _problems(self)
        if problems:
            raise ProfileError("; ".join(problems))

    @property
    def num_blocks(self) -> int:
        return self.kv_tokens // self.block_size

    def step_ms(self, batch_size: int, prefill_tokens: int) -> float:
        """Duration of one scheduler step: memory-bound decode plus compute-bound prefill."""
        if batch_size == 0:
            return 0.0
        return (
            self.decode_base_ms
            + self.decode_per_seq_ms * batch_size
            + self.prefill_ms_per_token * prefill_tokens
        )


def _problems(profile: EngineProfile) -> list[str]:
    problems = []
    positive = ("max_seqs", "max_batched_tokens", "kv_tokens", "block_size", "max_model_len")
    for name in (*positive, "output_tokens", "max_body_bytes", "max_loaded", "embedding_dim"):
        if getattr(profile, name) < 1:
            problems.append(f"{name} must be at least 1, got {getattr(profile, name)}")
    non_negative = (
        "decode_base_ms",
        "decode_per_seq_ms",
        "prefill_ms_per_token",
        "load_ms",
        "keep_alive_s",
        "network_latency_ms",
    )
    problems += [
        f"{name} must not be negative, got {getattr(profile, name)}"
        for name in non_negative
        if getattr(profile, name) < 0
    ]
    if profile.max_waiting is not None and profile.max_waiting < 0:
        problems.append(f"max_waiting must not be negative, got {profile.max_waiting}")
    if profile.rate_limit_rpm is not None and profile.rate_limit_rpm < 1:
        problems.append(f"rate_limit_rpm must be at least 1, got {profile.rate_limit_rpm}")
    if profile.kv_tokens < profile.block_size:
        problems.append("kv_tokens must hold at least one block")
    if profile.output_distribution not in ("fixed", "uniform", "exponential", "echo"):
        problems.append(
            f"output_distribution must be fixed, uniform, exponential or echo, "
            f"got {profile.output_distribution!r}"
        )
    return problems


# What each personality is like out of the box; every field can still be overridden.
PERSONALITY_DEFAULTS: dict[Personality, dict[str, Any]] = {
    "vllm": {},
    # Ollama (llama.cpp) on the same GPU with a 4-bit model: faster single stream, few parallel
    # slots (OLLAMA_NUM_PARALLEL), a bounded queue (OLLAMA_MAX_QUEUE), cold loads of ~3 s.
    "ollama": {
        "max_seqs": 4,
        "decode_base_ms": 9.0,
        "decode_per_seq_ms": 1.5,
        "prefill_ms_per_token": 0.12,
        "max_batched_tokens": 2048,
        "kv_tokens": 4 * 8192,
        "max_model_len": 8192,
        "max_waiting": 512,
        "load_ms": 3000.0,
        "max_loaded": 3,
    },
    # A hosted API: effectively unbounded capacity behind a fixed network round trip.
    "cloud": {
        "max_seqs": 100_000,
        "decode_base_ms": 15.0,
        "decode_per_seq_ms": 0.0,
        "prefill_ms_per_token": 0.02,
        "max_batched_tokens": 10_000_000,
        "kv_tokens": 100_000_000,
        "max_model_len": 128_000,
        "network_latency_ms": 200.0,
    },
}

FIELD_TYPES: dict[str, type] = {
    "max_seqs": int,
    "decode_base_ms": float,
    "decode_per_seq_ms": float,
    "prefill_ms_per_token": float,
    "max_batched_tokens": int,
    "kv_tokens": int,
    "block_size": int,
    "max_model_len": int,
    "output_tokens": int,
    "output_distribution": str,
    "max_waiting": int,
    "max_body_bytes": int,
    "load_ms": float,
    "max_loaded": int,
    "keep_alive_s": float,
    "network_latency_ms": float,
    "rate_limit_rpm": int,
    "embedding_dim": int,
}
assert set(FIELD_TYPES) == {f.name for f in fields(EngineProfile)}


def build_profile(
    personality: Personality, file: Path | None = None, overrides: dict[str, Any] | None = None
) -> EngineProfile:
    """Personality defaults, then the profile file's [engine] table, then explicit overrides."""
    values: dict[str, Any] = dict(PERSONALITY_DEFAULTS[personality])
    if file is not None:
        values.update(read_profile_file(file))
    values.update(overrides or {})
    return EngineProfile(**values)


def read_profile_file(path: Path) -> dict[str, Any]:
    try:
        document = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ProfileError(f"{path}: {exc}") from exc
    table = document.get("engine", {})
    if not isinstance(table, dict):
        raise ProfileError(f"{path}: [engine] must be a table")
    return {key: coerce(key, value, where=f"{path}: engine.{key}") for key, value in table.items()}


def coerce(key: str, value: Any, *, where: str) -> Any:
    """Check one profile value against its field's type (ints are accepted for floats)."""
    expected = FIELD_TYPES.get(key)
    if expected is None:
        raise ProfileError(f"{where}: unknown key (expected one of {', '.join(FIELD_TYPES)})")
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, expected) or isinstance(value, bool):
        raise ProfileError(f"{where}: expected {expected.__name__}, got {value!r}")
    return value


def profile_to_toml(profile: EngineProfile, comment: str = "") -> str:
    """The [engine] table `--profile` reads; None values are left out."""
    lines = [f"# {line}" for line in comment.splitlines()]
    lines.append("[engine]")
    for key, value in dataclasses.asdict(profile).items():
        if value is None:
            continue
        rendered = f'"{value}"' if isinstance(value, str) else repr(value)
        lines.append(f"{key} = {rendered}")
    return "\n".join(lines) + "\n"
