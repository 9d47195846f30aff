from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from proxy.sim.profile import (
    PERSONALITIES,
    EngineProfile,
    Personality,
    ProfileError,
    build_profile,
    profile_to_toml,
    read_profile_file,
)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "profile.toml"
    path.write_text(text)
    return path


# -- personality defaults ---------------------------------------------------------------------


def test_vllm_personality_is_the_plain_defaults() -> None:
    assert build_profile("vllm") == EngineProfile()


def test_ollama_personality_has_few_slots_a_bounded_queue_and_cold_loads() -> None:
    profile = build_profile("ollama")
    assert (profile.max_seqs, profile.max_waiting, profile.load_ms) == (4, 512, 3000.0)
    assert profile.block_size == EngineProfile().block_size  # untouched fields keep defaults


def test_cloud_personality_has_network_latency_and_huge_capacity() -> None:
    profile = build_profile("cloud")
    assert profile.network_latency_ms == 200.0
    assert profile.max_model_len == 128_000
    assert profile.max_seqs == 100_000


# -- file and explicit overrides --------------------------------------------------------------


def test_a_profile_file_overrides_the_personality_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, "[engine]\nmax_seqs = 8\ndecode_base_ms = 5\n")
    profile = build_profile("ollama", path)
    assert (profile.max_seqs, profile.decode_base_ms) == (8, 5.0)
    assert profile.load_ms == 3000.0


def test_an_integer_in_the_file_becomes_a_float_for_a_float_field(tmp_path: Path) -> None:
    values = read_profile_file(write(tmp_path, "[engine]\nprefill_ms_per_token = 1\n"))
    assert values == {"prefill_ms_per_token": 1.0}
    assert isinstance(values["prefill_ms_per_token"], float)


def test_a_file_without_an_engine_table_changes_nothing(tmp_path: Path) -> None:
    assert build_profile("vllm", write(tmp_path, "# nothing here\n")) == EngineProfile()


def test_explicit_overrides_win_over_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "[engine]\nmax_seqs = 8\nblock_size = 32\n")
    profile = build_profile("vllm", path, {"max_seqs": 2})
    assert (profile.max_seqs, profile.block_size) == (2, 32)


def test_explicit_overrides_apply_without_a_file() -> None:
    assert build_profile("cloud", overrides={"rate_limit_rpm": 60}).rate_limit_rpm == 60


# -- bad files --------------------------------------------------------------------------------


def test_an_unknown_key_in_the_file_names_file_and_key(tmp_path: Path) -> None:
    path = write(tmp_path, "[engine]\nmax_seqs = 8\nturbo = true\n")
    with pytest.raises(ProfileError) as caught:
        read_profile_file(path)
    assert str(path) in str(caught.value)
    assert "engine.turbo" in str(caught.value)
    assert "unknown key" in str(caught.value)


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ('max_seqs = "many"', "max_seqs"),
        ("max_seqs = 2.5", "max_seqs"),
        ("max_seqs = true", "max_seqs"),
        ("decode_base_ms = false", "decode_base_ms"),
        ("output_distribution = 3", "output_distribution"),
    ],
)
def test_a_wrong_type_in_the_file_names_file_and_key(tmp_path: Path, line: str, key: str) -> None:
    path = write(tmp_path, f"[engine]\n{line}\n")
    with pytest.raises(ProfileError) as caught:
        build_profile("vllm", path)
    assert str(path) in str(caught.value)
    assert f"engine.{key}" in str(caught.value)
    assert "expected" in str(caught.value)


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "[engine\nmax_seqs = 1\n")
    with pytest.raises(ProfileError, match=r"profile\.toml"):
        read_profile_file(path)


def test_a_missing_file_is_a_profile_error(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match=r"missing\.toml"):
        read_profile_file(tmp_path / "missing.toml")


def test_an_engine_key_that_is_not_a_table_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="must be a table"):
        read_profile_file(write(tmp_path, "engine = 3\n"))


# -- invalid values ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_seqs", 0),
        ("max_batched_tokens", 0),
        ("kv_tokens", 0),
        ("block_size", 0),
        ("max_model_len", -1),
        ("output_tokens", 0),
        ("embedding_dim", 0),
        ("max_loaded", 0),
        ("decode_base_ms", -1.0),
        ("decode_per_seq_ms", -0.1),
        ("prefill_ms_per_token", -0.01),
        ("load_ms", -5.0),
        ("network_latency_ms", -1.0),
        ("output_distribution", "normal"),
    ],
)
def test_an_invalid_value_is_a_profile_error_naming_the_field(field: str, value: Any) -> None:
    with pytest.raises(ProfileError, match=field):
        EngineProfile(**{field: value})


def test_a_kv_cache_smaller_than_one_block_is_rejected() -> None:
    with pytest.raises(ProfileError, match="kv_tokens must hold at least one block"):
        EngineProfile(kv_tokens=8, block_size=16)


def test_an_invalid_file_value_is_rejected_by_build_profile(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="max_seqs must be at least 1"):
        build_profile("vllm", write(tmp_path, "[engine]\nmax_seqs = 0\n"))


def test_all_problems_are_reported_together() -> None:
    with pytest.raises(ProfileError) as caught:
        EngineProfile(max_seqs=0, decode_base_ms=-1)
    assert "max_seqs" in str(caught.value)
    assert "decode_base_ms" in str(caught.value)


@pytest.mark.parametrize("field", ["max_waiting", "rate_limit_rpm"])
def test_a_negative_optional_limit_is_a_profile_error(field: str) -> None:
    values: dict[str, Any] = {field: -1}
    with pytest.raises(ProfileError, match=field):
        EngineProfile(**values)


# -- derived values ---------------------------------------------------------------------------


def test_num_blocks_is_kv_tokens_over_block_size() -> None:
    assert EngineProfile(kv_tokens=1000, block_size=16).num_blocks == 62


def test_step_ms_of_an_empty_batch_is_zero() -> None:
    assert EngineProfile().step_ms(0, 0) == 0.0


def test_step_ms_adds_base_per_sequence_and_prefill() -> None:
    profile = EngineProfile(decode_base_ms=10, decode_per_seq_ms=0.5, prefill_ms_per_token=0.1)
    assert profile.step_ms(4, 100) == pytest.approx(10 + 2 + 10)


# -- profile_to_toml --------------------------------------------------------------------------


@pytest.mark.parametrize("personality", PERSONALITIES)
def test_profile_to_toml_round_trips_through_read_profile_file(
    tmp_path: Path, personality: Personality
) -> None:
    profile = build_profile(personality)
    path = write(tmp_path, profile_to_toml(profile, comment="calibrated\non a test box"))
    assert EngineProfile(**read_profile_file(path)) == profile


def test_profile_to_toml_round_trips_non_default_values(tmp_path: Path) -> None:
    profile = EngineProfile(
        decode_per_seq_ms=0.0375, rate_limit_rpm=90, output_distribution="exponential"
    )
    path = write(tmp_path, profile_to_toml(profile))
    assert build_profile("vllm", path) == profile


def test_profile_to_toml_writes_the_comment_and_leaves_out_none_values() -> None:
    text = profile_to_toml(EngineProfile(), comment="line one\nline two")
    assert text.startswith("# line one\n# line two\n[engine]\n")
    assert "max_waiting" not in text
    assert "rate_limit_rpm" not in text
    assert "max_seqs = 256\n" in text
