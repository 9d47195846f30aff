from __future__ import annotations

from proxy.sim.kvcache import Block, BlockPool, chain_hashes


def words(prefix: str, count: int) -> list[str]:
    return [f" {prefix}{i}" for i in range(count)]


def cached_blocks(pool: BlockPool, hashes: list[int]) -> list[Block]:
    """Allocate, commit and release one block per hash, as a finished sequence leaves them."""
    blocks = pool.allocate(len(hashes))
    for block, block_hash in zip(blocks, hashes, strict=True):
        pool.commit(block, block_hash)
    pool.release(blocks)
    return blocks


# -- chain_hashes -----------------------------------------------------------------------------


def test_only_full_blocks_are_hashed() -> None:
    assert len(chain_hashes(words("t", 11), 4)) == 2
    assert chain_hashes(words("t", 3), 4) == []


def test_a_shared_prefix_gives_equal_leading_hashes_and_different_ones_after() -> None:
    a = words("s", 8) + words("a", 8)
    b = words("s", 8) + words("b", 8)
    hashes_a, hashes_b = chain_hashes(a, 4), chain_hashes(b, 4)
    assert hashes_a[:2] == hashes_b[:2]
    assert hashes_a[2] != hashes_b[2]
    assert hashes_a[3] != hashes_b[3]


def test_a_difference_early_changes_every_later_hash() -> None:
    a = words("t", 12)
    b = [" other", *a[1:]]
    assert all(x != y for x, y in zip(chain_hashes(a, 4), chain_hashes(b, 4), strict=True))


def test_a_parent_hash_continues_the_chain() -> None:
    tokens = words("t", 12)
    full = chain_hashes(tokens, 4)
    assert chain_hashes(tokens[4:], 4, parent=full[0]) == full[1:]


# -- match_prefix, hold, allocate, release, commit --------------------------------------------


def test_an_empty_pool_matches_nothing() -> None:
    pool = BlockPool(4)
    assert pool.match_prefix(chain_hashes(words("t", 8), 4)) == []


def test_committed_blocks_are_found_by_their_hashes() -> None:
    pool = BlockPool(4)
    hashes = chain_hashes(words("t", 8), 4)
    blocks = cached_blocks(pool, hashes)
    assert pool.match_prefix(hashes) == blocks


def test_match_prefix_stops_at_the_first_miss() -> None:
    pool = BlockPool(4)
    hashes = chain_hashes(words("t", 12), 4)
    blocks = cached_blocks(pool, hashes)
    assert pool.match_prefix([hashes[0], 12345, hashes[2]]) == blocks[:1]


def test_allocate_hands_out_held_blocks() -> None:
    pool = BlockPool(4)
    blocks = pool.allocate(3)
    assert len({block.id for block in blocks}) == 3
    assert [block.refs for block in blocks] == [1, 1, 1]
    assert pool.free_blocks == 1


def test_release_returns_blocks_to_the_free_list() -> None:
    pool = BlockPool(4)
    blocks = pool.allocate(3)
    pool.release(blocks)
    assert pool.free_blocks == 4
    assert [block.refs for block in blocks] == [0, 0, 0]


def test_holding_a_cached_block_takes_it_off_the_free_list() -> None:
    pool = BlockPool(4)
    hashes = chain_hashes(words("t", 8), 4)
    hits = cached_blocks(pool, hashes)
    pool.hold(pool.match_prefix(hashes))
    assert pool.free_blocks == 2
    assert [block.refs for block in hits] == [1, 1]


def test_a_block_held_twice_stays_held_until_both_release_it() -> None:
    pool = BlockPool(2)
    hashes = chain_hashes(words("t", 4), 4)
    hits = cached_blocks(pool, hashes)
    pool.hold(hits)
    pool.hold(hits)
    pool.release(hits)
    assert pool.free_blocks == 1
    pool.release(hits)
    assert pool.free_blocks == 2


def test_commit_keeps_the_first_block_for_a_hash() -> None:
    pool = BlockPool(4)
    first, second = pool.allocate(2)
    pool.commit(first, 77)
    pool.commit(second, 77)
    assert pool.match_prefix([77]) == [first]
    assert second.hash is None


def test_commit_does_not_rekey_a_cached_block() -> None:
    pool = BlockPool(4)
    (block,) = pool.allocate(1)
    pool.commit(block, 1)
    pool.commit(block, 2)
    assert pool.match_prefix([1]) == [block]
    assert pool.match_prefix([2]) == []


def test_allocating_a_cached_block_evicts_it_from_the_cache() -> None:
    pool = BlockPool(1)
    cached_blocks(pool, [5])
    (block,) = pool.allocate(1)
    assert block.hash is None
    assert pool.match_prefix([5]) == []


# -- eviction order ---------------------------------------------------------------------------


def test_the_least_recently_released_cached_blocks_are_evicted_first() -> None:
    pool = BlockPool(4)
    old = cached_blocks(pool, [1, 2])
    new = cached_blocks(pool, [3, 4])
    assert set(pool.allocate(2)) == set(old)
    assert pool.match_prefix([1]) == []
    assert pool.match_prefix([3, 4]) == new


def test_a_sequence_tail_block_is_evicted_before_its_head() -> None:
    pool = BlockPool(3)
    head, middle, tail = cached_blocks(pool, [1, 2, 3])
    assert pool.allocate(1) == [tail]
    assert pool.match_prefix([1, 2, 3]) == [head, middle]


def test_reusing_a_cached_block_makes_it_recent_again() -> None:
    pool = BlockPool(2)
    (first,) = cached_blocks(pool, [1])
    (second,) = cached_blocks(pool, [2])
    pool.hold([first])
    pool.release([first])
    assert pool.allocate(1) == [second]
    assert pool.match_prefix([1]) == [first]


def test_uncached_released_blocks_are_reused_before_cached_ones() -> None:
    pool = BlockPool(3)
    cached, plain_a, plain_b = pool.allocate(3)
    pool.commit(cached, 9)
    pool.release([cached])
    pool.release([plain_a, plain_b])
    taken = pool.allocate(2)
    assert set(taken) == {plain_a, plain_b}
    assert pool.match_prefix([9]) == [cached]


# -- can_allocate and usage -------------------------------------------------------------------


def test_can_allocate_counts_unheld_hits_against_free_blocks() -> None:
    pool = BlockPool(4)
    hits = cached_blocks(pool, [1, 2])
    assert pool.can_allocate(hits, 2)
    assert not pool.can_allocate(hits, 3)


def test_can_allocate_does_not_charge_for_hits_someone_already_holds() -> None:
    pool = BlockPool(4)
    hits = cached_blocks(pool, [1, 2])
    pool.hold(hits)
    assert pool.can_allocate(hits, 2)
    assert not pool.can_allocate(hits, 3)


def test_can_allocate_without_hits_compares_with_free_blocks() -> None:
    pool = BlockPool(4)
    pool.allocate(1)
    assert pool.can_allocate([], 3)
    assert not pool.can_allocate([], 4)


def test_usage_is_the_share_of_held_blocks() -> None:
    pool = BlockPool(4)
    assert pool.usage == 0.0
    blocks = pool.allocate(3)
    assert pool.usage == 0.75
    pool.release(blocks)
    assert pool.usage == 0.0
