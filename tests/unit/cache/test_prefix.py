"""cache/prefix.py: the rendered prompt, its block hash chain, the prefix index, prefix warming."""

from __future__ import annotations

import asyncio

import orjson

from cache.prefix import PrefixIndex, Warming, block_hashes, render

BLOCK = 8  # characters per block in these tests


def blocks(*texts: str) -> list[bytes]:
    """The hashes of a text made of the given blocks, each padded to exactly BLOCK characters."""
    return block_hashes("".join(t.ljust(BLOCK, ".")[:BLOCK] for t in texts), BLOCK)


# --- render --------------------------------------------------------------------------------------


def test_render_puts_tools_first_then_every_message_in_order() -> None:
    tools = [{"type": "function", "function": {"name": "lookup"}}]
    body = {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello"},
            {"role": "user", "content": "Bye"},
        ],
        "tools": tools,
    }
    text = render("chat", body)
    assert text == "\n".join(
        [
            orjson.dumps(tools).decode(),
            "<|system|>Be brief.",
            "<|user|>Hi",
            "<|assistant|>Hello",
            "<|user|>Bye",
        ]
    )


def test_render_without_tools_starts_with_the_first_message() -> None:
    body = {"messages": [{"role": "user", "content": "Hi"}], "tools": []}
    assert render("chat", body) == "<|user|>Hi"


def test_render_keeps_the_role_of_each_message() -> None:
    as_user = render("chat", {"messages": [{"role": "user", "content": "x"}]})
    as_system = render("chat", {"messages": [{"role": "system", "content": "x"}]})
    assert as_user != as_system


def test_render_of_content_parts_includes_their_text() -> None:
    parts = [{"type": "text", "text": "look at this"}]
    text = render("chat", {"messages": [{"role": "user", "content": parts}]})
    assert text.startswith("<|user|>")
    assert "look at this" in text


def test_render_of_a_completion_is_its_prompt_string() -> None:
    assert render("completions", {"prompt": "Once upon a time"}) == "Once upon a time"


def test_render_of_a_completion_prompt_list() -> None:
    text = render("completions", {"prompt": ["first", "second"]})
    assert text.index("first") < text.index("second")
    assert render("completions", {"prompt": ["first", "second"]}) == text
    assert render("completions", {"prompt": ["first", "other"]}) != text


def test_requests_sharing_leading_messages_share_a_rendered_prefix() -> None:
    system = {"role": "system", "content": "You are the travel desk. " * 10}
    one = render("chat", {"messages": [system, {"role": "user", "content": "Lyon?"}]})
    two = render("chat", {"messages": [system, {"role": "user", "content": "Oslo?"}]})
    shared = render("chat", {"messages": [system]})
    assert one.startswith(shared)
    assert two.startswith(shared)


# --- block_hashes --------------------------------------------------------------------------------


def test_only_full_blocks_are_hashed() -> None:
    assert block_hashes("", BLOCK) == []
    assert block_hashes("x" * (BLOCK - 1), BLOCK) == []
    assert len(block_hashes("x" * BLOCK, BLOCK)) == 1
    assert len(block_hashes("x" * (3 * BLOCK + BLOCK - 1), BLOCK)) == 3


def test_a_partial_last_block_does_not_change_the_hashes() -> None:
    text = "abcdefgh" * 3
    assert block_hashes(text + "xyz", BLOCK) == block_hashes(text, BLOCK)


def test_hashes_are_deterministic() -> None:
    text = "the same prompt, twice over"
    assert block_hashes(text, 4) == block_hashes(text, 4)


def test_each_hash_stands_for_everything_before_it() -> None:
    """Equal blocks at different places (or after different blocks) hash differently."""
    same = blocks("a", "a", "a")
    assert len(set(same)) == 3
    assert blocks("b", "a")[1] != blocks("c", "a")[1]


def test_changing_the_first_block_changes_every_later_hash() -> None:
    one = blocks("aa", "bb", "cc", "dd")
    two = blocks("zz", "bb", "cc", "dd")
    assert all(x != y for x, y in zip(one, two, strict=True))


def test_texts_sharing_k_leading_blocks_share_exactly_k_hashes() -> None:
    one = blocks("aa", "bb", "cc", "dd", "ee")
    two = blocks("aa", "bb", "cc", "XX", "ee")
    assert one[:3] == two[:3]
    assert set(one) & set(two) == set(one[:3])


# --- PrefixIndex ---------------------------------------------------------------------------------


def test_an_empty_index_matches_nothing() -> None:
    assert PrefixIndex(100).match(blocks("a", "b")) == {}
    assert PrefixIndex(100).match([]) == {}


def test_match_counts_the_leading_blocks_a_backend_holds() -> None:
    index = PrefixIndex(100)
    index.record(blocks("a", "b", "c"), "gpu-1")
    assert index.match(blocks("a", "b", "c")) == {"gpu-1": 3}
    assert index.match(blocks("a", "b", "c", "d", "e")) == {"gpu-1": 3}
    assert index.match(blocks("a", "b", "x", "d")) == {"gpu-1": 2}
    assert index.match(blocks("x", "b", "c")) == {}


def test_match_stops_at_the_first_block_a_backend_lacks() -> None:
    """Blocks 1, 2 and 4 held: only the first two are a usable prefix."""
    hashes = blocks("a", "b", "c", "d")
    index = PrefixIndex(100)
    index.record([hashes[0], hashes[1], hashes[3]], "gpu-1")
    assert index.match(hashes) == {"gpu-1": 2}


def test_match_reports_each_backend_separately() -> None:
    hashes = blocks("a", "b", "c", "d", "e")
    index = PrefixIndex(100)
    index.record(hashes[:2], "short")
    index.record(hashes[:4], "long")
    index.record(hashes, "all")
    index.record(blocks("x", "y"), "other")
    assert index.match(hashes) == {"short": 2, "long": 4, "all": 5}


def test_a_backend_with_a_gap_is_dropped_while_others_go_on() -> None:
    hashes = blocks("a", "b", "c", "d")
    index = PrefixIndex(100)
    index.record([hashes[0], hashes[1], hashes[3]], "gappy")
    index.record(hashes, "full")
    assert index.match(hashes) == {"gappy": 2, "full": 4}


def test_record_counts_each_block_once() -> None:
    index = PrefixIndex(100)
    index.record(blocks("a", "b"), "gpu-1")
    index.record(blocks("a", "b"), "gpu-2")
    index.record(blocks("a", "b", "c"), "gpu-1")
    assert len(index) == 3


def test_the_least_recently_used_blocks_are_evicted_at_the_bound() -> None:
    index = PrefixIndex(4)
    old = blocks("o1", "o2")
    new = blocks("n1", "n2", "n3")
    index.record(old, "gpu-1")
    index.record(new, "gpu-1")
    assert len(index) == 4
    assert index.match(old) == {}  # its first block went first
    assert index.match(new) == {"gpu-1": 3}


def test_record_refreshes_recency() -> None:
    index = PrefixIndex(4)
    first = blocks("f1", "f2")
    second = blocks("s1", "s2")
    index.record(first, "gpu-1")
    index.record(second, "gpu-1")
    index.record(first, "gpu-2")  # used again: now the most recent
    index.record(blocks("t1", "t2"), "gpu-1")  # two more evict the two least recent
    assert index.match(second) == {}
    assert index.match(first) == {"gpu-1": 2, "gpu-2": 2}
    assert len(index) == 4


def test_forget_drops_one_backend_only() -> None:
    hashes = blocks("a", "b", "c")
    index = PrefixIndex(100)
    index.record(hashes, "gpu-1")
    index.record(hashes[:2], "gpu-2")
    index.forget("gpu-1")
    assert index.match(hashes) == {"gpu-2": 2}
    assert len(index) == 2  # the block only gpu-1 held is gone
    index.forget("gpu-2")
    assert len(index) == 0
    assert index.match(hashes) == {}


# --- Warming -------------------------------------------------------------------------------------


def test_lead_marks_only_the_blocks_past_matched() -> None:
    hashes = blocks("a", "b", "c", "d")
    assert Warming().lead("gpu-1", hashes, matched=1) == hashes[1:]
    assert Warming().lead("gpu-1", hashes, matched=0) == hashes
    assert Warming().lead("gpu-1", hashes, matched=4) == []


def test_lead_skips_blocks_another_request_already_leads() -> None:
    hashes = blocks("a", "b", "c", "d")
    warming = Warming()
    assert warming.lead("gpu-1", hashes[:2], matched=0) == hashes[:2]
    assert warming.lead("gpu-1", hashes, matched=0) == hashes[2:]
    assert warming.lead("gpu-1", hashes, matched=0) == []


def test_lead_is_per_backend() -> None:
    hashes = blocks("a", "b")
    warming = Warming()
    assert warming.lead("gpu-1", hashes, matched=0) == hashes
    assert warming.lead("gpu-2", hashes, matched=0) == hashes


def test_done_lets_the_blocks_be_led_again() -> None:
    hashes = blocks("a", "b")
    warming = Warming()
    led = warming.lead("gpu-1", hashes, matched=0)
    warming.done("gpu-1", led)
    assert warming.lead("gpu-1", hashes, matched=0) == hashes


async def test_wait_returns_false_at_once_when_nothing_warms() -> None:
    hashes = blocks("a", "b", "c")
    warming = Warming()
    async with asyncio.timeout(0.5):
        assert await warming.wait("gpu-1", hashes, 2, limit=30) is False
        assert await warming.wait("gpu-1", hashes, 0, limit=30) is False


async def test_wait_is_about_the_last_matched_block_only() -> None:
    hashes = blocks("a", "b", "c")
    warming = Warming()
    warming.lead("gpu-1", hashes, matched=2)  # only block 3 warms
    async with asyncio.timeout(0.5):
        assert await warming.wait("gpu-1", hashes, 2, limit=30) is False


async def still_waiting(waiter: asyncio.Task[bool]) -> bool:
    """Not done after the loop has had a few turns to finish it."""
    for _ in range(5):
        await asyncio.sleep(0)
    return not waiter.done()


async def test_wait_blocks_until_done_and_returns_true() -> None:
    hashes = blocks("a", "b", "c")
    warming = Warming()
    led = warming.lead("gpu-1", hashes, matched=0)
    waiter = asyncio.create_task(warming.wait("gpu-1", hashes, 3, limit=30))
    assert await still_waiting(waiter)
    warming.done("gpu-1", led)
    async with asyncio.timeout(0.5):
        assert await waiter is True


async def test_wait_gives_up_after_the_limit_and_returns_true() -> None:
    hashes = blocks("a", "b")
    warming = Warming()
    warming.lead("gpu-1", hashes, matched=0)
    loop = asyncio.get_running_loop()
    start = loop.time()
    async with asyncio.timeout(2):
        assert await warming.wait("gpu-1", hashes, 2, limit=0.05) is True
    assert loop.time() - start >= 0.04


async def test_done_for_another_backend_does_not_release() -> None:
    hashes = blocks("a", "b")
    warming = Warming()
    led = warming.lead("gpu-1", hashes, matched=0)
    waiter = asyncio.create_task(warming.wait("gpu-1", hashes, 2, limit=30))
    await asyncio.sleep(0)
    warming.done("gpu-2", led)
    assert await still_waiting(waiter)
    warming.done("gpu-1", led)
    async with asyncio.timeout(0.5):
        assert await waiter is True


async def test_one_done_releases_every_waiter() -> None:
    hashes = blocks("a", "b")
    warming = Warming()
    led = warming.lead("gpu-1", hashes, matched=0)
    waiters = [asyncio.create_task(warming.wait("gpu-1", hashes, n, limit=30)) for n in (1, 2, 2)]
    await asyncio.sleep(0)
    warming.done("gpu-1", led)
    async with asyncio.timeout(10):
        assert await asyncio.gather(*waiters) == [True, True, True]
