"""A paged KV cache with automatic prefix caching, as vLLM's block manager keeps it.

The cache is a fixed number of blocks of `block_size` tokens. A sequence holds the blocks its
tokens live in. A full block, once computed, is keyed by the hash chain of every token up to its
end, so a later sequence whose prompt starts with the same tokens reuses it instead of prefilling
them again. Blocks nobody holds stay cached and are evicted least-recently-freed first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(eq=False)
class Block:
    id: int
    hash: int | None = None
    refs: int = 0


def chain_hashes(tokens: Sequence[str], block_size: int, parent: int | None = None) -> list[int]:
    """Hash chain over the full blocks of `tokens`: each hash covers every token before it."""
    hashes = []
    for start in range(0, len(tokens) - block_size + 1, block_size):
        parent = hash((parent, tuple(tokens[start : start + block_size])))
        hashes.append(parent)
    return hashes


class BlockPool:
    def __init__(self, num_blocks: int) -> None:
        self.num_blocks = num_blocks
        # Blocks are made on first use, so a cloud-sized cache costs nothing up front.
        self._never_used = num_blocks
        # Blocks released by their last holder: uncached ones first, then cached ones oldest
        # first, which is the order they are handed out again (and so evicted).
        self._free: OrderedDict[int, Block] = OrderedDict()
        self._cached: dict[int, Block] = {}

    @property
    def free_blocks(self) -> int:
        return len(self._free) + self._never_used

    @property
    def usage(self) -> float:
        """Share of blocks held by sequences (cached but unheld blocks count as free)."""
        return 1.0 - self.free_blocks / self.num_blocks

    def match_prefix(self, hashes: Sequence[int]) -> list[Block]:
        """The cached blocks that cover the longest prefix of `hashes`."""
        hits = []
        for h in hashes:
            block = self._cached.get(h)
            if block is None:
                break
            hits.append(block)
        return hits

    def can_allocate(self, hits: Sequence[Block], new_blocks: int) -> bool:
        """Whether `hits` can be held and `new_blocks` more handed out at once."""
        unheld_hits = sum(1 for block in hits if block.refs == 0)
        return self.free_blocks - unheld_hits >= new_blocks

    def hold(self, blocks: Sequence[Block]) -> None:
        for block in blocks:
            if block.refs == 0:
                del self._free[block.id]
            block.refs += 1

    def allocate(self, count: int) -> list[Block]:
        """Hand out `count` blocks, evicting cached ones if need be; the caller checked room."""
        blocks = []
        for _ in range(count):
            block = self._take()
            block.refs = 1
            blocks.append(block)
        return blocks

    def _take(self) -> Block:
        if self._free and next(iter(self._free.values())).hash is None:
            return self._free.popitem(last=False)[1]
        if self._never_used:
            self._never_used -= 1
            return Block(self.num_blocks - self._never_used - 1)
        _, block = self._free.popitem(last=False)  # evict the least recently freed
        if block.hash is not None and self._cached.get(block.hash) is block:
            del self._cached[block.hash]
        block.hash = None
        return block

    def release(self, blocks: Sequence[Block]) -> None:
        """Drop a sequence's hold; cached blocks go to the back of the eviction order."""
        for block in reversed(blocks):
            block.refs -= 1
            if block.refs == 0:
                self._free[block.id] = block
                if block.hash is None:
                    # An uncached block is worth nothing: hand it out before any cached one.
                    self._free.move_to_end(block.id, last=False)

    def commit(self, block: Block, block_hash: int) -> None:
        """A full block has been computed: make it findable by later prompts."""
        if block.hash is None and block_hash not in self._cached:
            block.hash = block_hash
            self._cached[block_hash] = block
