"""proxy/legs/cloud.py's prices: a model priced per token is looked up in litellm's tables once
and priced by its rates after; a tiered model (a dearer price past some count) is looked up
every time. litellm's cost_per_token is replaced by price tables written here."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from policies.model import CloudTarget
from proxy.legs.cloud import Cloud

FLAT = CloudTarget("flat", "openai/flat")
TIERED = CloudTarget("tiered", "gemini/tiered")
UNPRICED = CloudTarget("unpriced", "openai/unknown")


@dataclass
class Tables:
    """litellm's cost_per_token over three models, counting the look-ups."""

    asked: list[tuple[str, int, int]] = field(default_factory=list)

    def cost_per_token(
        self, model: str, prompt_tokens: int, completion_tokens: int
    ) -> tuple[float, float]:
        self.asked.append((model, prompt_tokens, completion_tokens))
        if model == FLAT.model:
            return prompt_tokens * 1.5e-7, completion_tokens * 6e-7
        if model == TIERED.model:  # twice the price past 200,000 prompt tokens
            rate = 2.5e-6 if prompt_tokens > 200_000 else 1.25e-6
            return prompt_tokens * rate, completion_tokens * 1e-5
        raise ValueError(f"model {model} isn't mapped yet")


def cloud_over(tables: Tables) -> Cloud:
    cloud = Cloud()
    cloud._module = tables  # what `import litellm` would have given
    return cloud


def test_a_flat_model_is_looked_up_once_and_priced_exactly() -> None:
    tables = Tables()
    cloud = cloud_over(tables)
    for prompt, completion in [(10, 128), (150_000, 4), (0, 0), (3, 1)]:
        assert cloud.price(FLAT, prompt, completion) == pytest.approx(
            prompt * 1.5e-7 + completion * 6e-7, rel=1e-12
        )
    looked_up = len(tables.asked)
    cloud.price(FLAT, 99, 99)
    assert len(tables.asked) == looked_up  # the rates, not the tables


def test_a_tiered_model_is_priced_by_the_tables_every_time() -> None:
    tables = Tables()
    cloud = cloud_over(tables)
    assert cloud.price(TIERED, 300_000, 0) == pytest.approx(300_000 * 2.5e-6)
    assert cloud.price(TIERED, 1_000, 10) == pytest.approx(1_000 * 1.25e-6 + 10 * 1e-5)
    assert tables.asked[-1] == (TIERED.model, 1_000, 10)


def test_an_unpriced_model_costs_nothing_and_never_fails() -> None:
    cloud = cloud_over(Tables())
    assert cloud.price(UNPRICED, 1_000, 1_000) == 0.0
