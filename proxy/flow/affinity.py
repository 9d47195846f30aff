"""Prefix-aware routing and prefix coalescing, at the pipeline's edge.

What the proxy believes its replicas hold in their KV caches (cache/prefix.py), and the prefills
under way. Outlives policy reloads, as the engines' caches do.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

from cache.prefix import PrefixIndex, Warming, block_hashes, render
from policies.model import Balancing
from proxy.endpoints import ENDPOINTS
from proxy.schema import ProxyRequest


@dataclass(frozen=True)
class Prompt:
    """A request's prompt blocks, and how many prompt tokens each replica already holds."""

    hashes: list[bytes]
    held: dict[str, int]  # backend -> tokens
    matched: dict[str, int]  # backend -> blocks


@dataclass
class Affinity:
    index: PrefixIndex = field(default_factory=lambda: PrefixIndex(Balancing().index_blocks))
    warming: Warming = field(default_factory=Warming)
    # round-robin turns, one sequence per tenant: another tenant's traffic never moves yours
    turns: dict[str, itertools.count[int]] = field(default_factory=dict)
    waited: int = 0  # requests that waited for another one's prefill

    def turn(self, scope: str) -> int:
        return next(self.turns.setdefault(scope, itertools.count()))

    def prompt(
        self,
        request: ProxyRequest,
        balancing: Balancing,
        scope: str = "",
        hashes: list[bytes] | None = None,
    ) -> Prompt:
        """The prompt's blocks (prompt_hashes, unless given: read off the loop for a long body),
        and what each replica holds of them."""
        if hashes is None:
            hashes = prompt_hashes(request, balancing, scope)
        if not hashes:
            return Prompt([], {}, {})
        self.index.max_blocks = balancing.index_blocks
        matched = self.index.match(hashes)
        held = {name: blocks * balancing.block_tokens for name, blocks in matched.items()}
        return Prompt(hashes, held, matched)

    async def enter(
        self, backend: str, prompt: Prompt, balancing: Balancing, can_lead: bool = True
    ) -> list[bytes]:
        """Before sending to `backend`: wait (bounded) if the prefix it holds for this prompt
        is still being prefilled there by another request; then record the prompt's blocks
        against it. Returns the blocks this request leads the prefill of. Only a stream can
        lead: the proxy sees its first token, while a whole answer arrives at its end."""
        if not prompt.hashes:
            return []
        # matched again now, not at planning: a request that leads this prefix may have
        # entered in between
        matched = self.index.match(prompt.hashes).get(backend, 0)
        if balancing.warm_wait_s > 0 and await self.warming.wait(
            backend, prompt.hashes, matched, balancing.warm_wait_s
        ):
            self.waited += 1
        self.index.record(prompt.hashes, backend)
        shared = matched * balancing.block_tokens >= balancing.min_prefix_tokens
        long_enough = len(prompt.hashes) * balancing.block_tokens >= balancing.min_prefix_tokens
        if can_lead and balancing.warm_wait_s > 0 and long_enough and not shared:
            return self.warming.lead(backend, prompt.hashes, matched)
        return []

    def leave(self, backend: str, led: Sequence[bytes]) -> None:
        """The request's first token came (or it failed): its prefill is over."""
        self.warming.done(backend, led)


def prompt_hashes(request: ProxyRequest, balancing: Balancing, scope: str = "") -> list[bytes]:
    """The prompt's blocks, hashed within the caller's tenant `scope`: one tenant's prompts
    never match another's, so no routing choice, wait or header reveals whether another tenant
    sent a prompt (the engines' own prefix caches are shared; see docs/security.md). At most as
    many as the index holds: a prompt of more would push its own first blocks out of it. Pure,
    so a worker thread may compute it."""
    if balancing.strategy != "prefix" or not ENDPOINTS[request.endpoint].prefix_routed:
        return []
    chars = balancing.index_blocks * balancing.block_chars
    text = render(request.endpoint, request.body, chars)
    return block_hashes(text[:chars], balancing.block_chars, seed=scope.encode())


@dataclass
class Prefill:
    """Around the attempts on `backend`: wait for, or lead, a prefill of the same prompt there
    (Affinity.enter), and end it once the attempts are over (Affinity.leave). A class, not a
    generator-based context manager: one per request, and a generator's machinery cost more
    than what it does."""

    affinity: Affinity
    backend: str
    prompt: Prompt
    balancing: Balancing
    can_lead: bool
    led: list[bytes] = field(default_factory=list)

    async def __aenter__(self) -> None:
        self.led = await self.affinity.enter(
            self.backend, self.prompt, self.balancing, self.can_lead
        )

    async def __aexit__(self, *exc: object) -> None:
        self.affinity.leave(self.backend, self.led)
