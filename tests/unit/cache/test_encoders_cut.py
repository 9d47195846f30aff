"""cache/encoders.py: a text longer than the embedding model reads has no place in the
semantic space (the zero vector: similar to nothing), whole or in a batch."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from cache.encoders import TOKENIZER_FILE, OnnxEncoder, load_tokenizer, source_model

DIMENSION = 8


class _Session:
    """Hidden states of ones: the model's part is not at stake here, only what it is fed."""

    def get_outputs(self) -> list[Any]:
        return [SimpleNamespace(shape=[None, None, DIMENSION])]

    def run(self, outputs: list[str], feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        rows, width = feed["input_ids"].shape
        return [np.ones((rows, width, DIMENSION), dtype=np.float32)]


@pytest.mark.parametrize("batched", [False, True])
def test_a_text_past_the_models_window_embeds_as_nothing(batched: bool) -> None:
    """512 Chinese characters are 512 tokens: two such questions differing only past the 256th
    embedded the same, at similarity 1.0."""
    tokenizer = load_tokenizer(next(source_model().rglob(TOKENIZER_FILE)))
    encoder = OnnxEncoder(_Session(), tokenizer, batched=batched)
    vectors = encoder.encode(["How do I reset my password?", "中" * 300 + "是"])
    assert np.linalg.norm(vectors[0]) == pytest.approx(1.0)
    assert not vectors[1].any()
