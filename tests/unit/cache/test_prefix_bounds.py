"""The prompt's blocks read no further than they can serve (issue 30): rendering stops once
past the characters asked for, and a prompt is hashed into no more blocks than the prefix
index holds (more would push the prompt's own first blocks out of it)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from cache import prefix
from cache.prefix import block_hashes, render
from policies.model import Balancing
from proxy.flow.affinity import prompt_hashes
from proxy.schema import ProxyRequest

MESSAGES = [{"role": "user", "content": [{"type": "text", "text": "a" * 10}]}] * 1000


def test_rendering_stops_once_past_the_characters_wanted(monkeypatch: pytest.MonkeyPatch) -> None:
    dumped: list[Any] = []
    real = orjson.dumps

    def counting(value: Any) -> bytes:
        dumped.append(value)
        return real(value)

    monkeypatch.setattr(prefix.orjson, "dumps", counting)
    text = render("chat", {"messages": MESSAGES}, 100)
    assert len(dumped) < 5
    assert render("chat", {"messages": MESSAGES}).startswith(text)


def test_a_prompt_is_hashed_into_at_most_the_blocks_the_index_holds() -> None:
    balancing = Balancing(block_tokens=2, index_blocks=16)  # blocks of 8 characters
    request = ProxyRequest("chat", "m", False, {"model": "m", "messages": MESSAGES})
    whole = block_hashes(render("chat", request.body), balancing.block_chars, b"t")
    assert prompt_hashes(request, balancing, "t") == whole[:16]
    assert len(whole) > 16
