"""Which replica holds which prompt prefix in its KV cache, as far as the proxy can tell.

Engines keep computed prompt blocks and reuse them for any later prompt that starts the same way
(vLLM's automatic prefix caching, SGLang's radix cache). The proxy cannot see their caches, but
it knows what it sent where: the rendered prompt is cut into blocks of characters, each keyed by
a hash chain (so a block's key stands for everything before it too), and every block a request
carried is recorded against the replica that served it. A new request's blocks are matched in
order: the number of leading blocks a replica is believed to hold is the prefix it would not
have to prefill again. Bounded: least recently used blocks are forgotten first, as engines evict
theirs.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import orjson


def render(endpoint: str, body: Mapping[str, Any], chars: int | None = None) -> str:
    """The prompt as an engine would see it, in order: tools, then every message (role and
    content), or a completion's prompt. Not the exact chat template, but the same order, so
    requests that share a prefix share it here too. `chars`: only the first that many are
    wanted (messages past them are not rendered; the result may run a little longer)."""
    if endpoint == "completions":
        prompt = body.get("prompt")
        return prompt if isinstance(prompt, str) else orjson.dumps(prompt).decode()
    parts = []
    if body.get("tools"):
        parts.append(orjson.dumps(body["tools"]).decode())
    size = len(parts[0]) if parts else 0
    for message in body.get("messages") or []:
        if chars is not None and size > chars:
            break
        if isinstance(message, dict):
            content = message.get("content")
            text = content if isinstance(content, str) else orjson.dumps(content).decode()
            parts.append(f"<|{message.get('role')}|>{text}")
            size += len(parts[-1]) + 1
    return "\n".join(parts)


def block_hashes(text: str, block_chars: int, seed: bytes = b"") -> list[bytes]:
    """Hash chain over the full blocks of `text` (a partial last block is no shared prefix),
    started from `seed`: chains with different seeds never meet."""
    hashes, parent = [], hashlib.blake2b(seed, digest_size=12).digest() if seed else b""
    for start in range(0, len(text) - block_chars + 1, block_chars):
        parent = hashlib.blake2b(
            parent + text[start : start + block_chars].encode(), digest_size=12
        ).digest()
        hashes.append(parent)
    return hashes


class PrefixIndex:
    def __init__(self, max_blocks: int) -> None:
        self.max_blocks = max_blocks
        self._holders: OrderedDict[bytes, set[str]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._holders)

    def match(self, hashes: Sequence[bytes]) -> dict[str, int]:
        """Per replica, how many leading blocks of this prompt it is believed to hold."""
        matched: dict[str, int] = {}
        alive: set[str] | None = None
        for depth, block in enumerate(hashes, start=1):
            holders = self._holders.get(block)
            alive = set(holders or ()) if alive is None else alive & (holders or set())
            if not alive:
                break
            for name in alive:
                matched[name] = depth
        return matched

    def record(self, hashes: Sequence[bytes], backend: str) -> None:
        for block in hashes:
            holders = self._holders.pop(block, None) or set()
            holders.add(backend)
            self._holders[block] = holders  # most recently used last
        while len(self._holders) > self.max_blocks:
            self._holders.popitem(last=False)

    def forget(self, backend: str) -> None:
        """A replica that restarted (or went down) holds nothing any more."""
        for block in list(self._holders):
            holders = self._holders[block]
            holders.discard(backend)
            if not holders:
                del self._holders[block]


class Warming:
    """Prefix coalescing: the prompt blocks a replica is prefilling right now, and who waits.

    When requests sharing a long prefix no replica holds arrive together, each would prefill it
    (an engine reuses only blocks already computed). The first one leads: its new blocks are
    marked warming on its replica until its first token. A request routed to that replica for
    those blocks waits (bounded) for the lead, then finds them cached.
    """

    def __init__(self) -> None:
        self._events: dict[tuple[str, bytes], asyncio.Event] = {}

    def lead(self, backend: str, hashes: Sequence[bytes], matched: int) -> list[bytes]:
        """Mark the blocks past `matched` as warming on `backend`; those this request leads."""
        led = [h for h in hashes[matched:] if (backend, h) not in self._events]
        event = asyncio.Event()
        for block in led:
            self._events[(backend, block)] = event
        return led

    def done(self, backend: str, led: Sequence[bytes]) -> None:
        for block in led:
            event = self._events.pop((backend, block), None)
            if event is not None:
                event.set()

    async def wait(self, backend: str, hashes: Sequence[bytes], matched: int, limit: float) -> bool:
        """Wait (at most `limit` s) until the last matched block is warm; True if it waited."""
        event = self._events.get((backend, hashes[matched - 1])) if matched else None
        if event is None:
            return False
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(limit):
                await event.wait()
        return True
