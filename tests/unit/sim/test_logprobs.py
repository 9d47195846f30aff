"""A token's logprobs entry: OpenAI's shape, deterministic, and probabilities that make sense."""

from __future__ import annotations

import math

import pytest

from proxy.sim.logprobs import entry


def test_an_entry_has_openais_shape() -> None:
    got = entry(" cache", 4, 3)
    assert set(got) == {"token", "logprob", "bytes", "top_logprobs"}
    assert got["token"] == " cache"
    assert got["bytes"] == list(b" cache")
    assert len(got["top_logprobs"]) == 3
    assert all(set(top) == {"token", "logprob", "bytes"} for top in got["top_logprobs"])
    assert all(top["bytes"] == list(top["token"].encode()) for top in got["top_logprobs"])


def test_the_same_token_at_the_same_place_has_the_same_entry() -> None:
    assert entry(" a", 2, 5) == entry(" a", 2, 5)
    assert entry(" a", 2, 5) != entry(" a", 3, 5)


@pytest.mark.parametrize("top", [1, 2, 5, 20])
def test_the_token_is_the_likeliest_and_the_probabilities_add_up_to_at_most_one(top: int) -> None:
    got = entry(" é", 7, top)
    ranked = got["top_logprobs"]
    assert ranked[0] == {key: got[key] for key in ("token", "logprob", "bytes")}
    logprobs = [item["logprob"] for item in ranked]
    assert logprobs == sorted(logprobs, reverse=True)
    assert len({item["token"] for item in ranked}) == top  # no token twice
    assert sum(math.exp(lp) for lp in logprobs) <= 1
    assert all(lp < 0 for lp in logprobs)


def test_no_alternatives_asked_none_given() -> None:
    assert entry(" a", 0, 0)["top_logprobs"] == []
