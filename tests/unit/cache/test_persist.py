"""cache/persist.py: the cache saved to one file and loaded back; a bad file is moved aside."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import stat
from pathlib import Path

import numpy as np
import orjson
import pytest

from cache import persist
from cache.keys import CacheKeys, cache_keys
from cache.store import AnswerCache, Entry, Hit
from policies.model import CacheRule


def vector(*values: float) -> np.ndarray:
    v = np.array(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def entry(
    question: str | None, answer: bytes, vec: np.ndarray | None, created: float = 1000.0
) -> Entry:
    keys = CacheKeys("scope-1", f"exact-{question}", "context-1" if question else None, question)
    return Entry(0, keys, answer, created, created + 3600.5, vec)


ENTRIES = [
    entry("How do I reverse a list?", b'{"choices":[{"text":"reversed()"}]}', vector(1, 2, 3, 4)),
    entry("Ünïcödé, 中文 and emoji 🎉?", '{"a":"réponse 🎉"}'.encode(), vector(0.1, -3, 0, 2)),
    entry(None, b'{"object":"text_completion"}', None),
    entry("no vector", b"{}", None, created=12.25),
    dataclasses.replace(entry("from a stream", b"{}", None), usage_unknown=True),
]


def same(loaded: list[Entry], saved: list[Entry]) -> None:
    assert len(loaded) == len(saved)
    for got, want in zip(loaded, saved, strict=True):
        assert (got.keys, got.answer, got.created, got.expires, got.usage_unknown) == (
            want.keys,
            want.answer,
            want.created,
            want.expires,
            want.usage_unknown,
        )
        if want.vector is None:
            assert got.vector is None
        else:
            assert got.vector is not None
            assert got.vector.dtype == np.float32
            assert np.array_equal(got.vector, want.vector)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "cache.jsonl"


def test_save_then_load_round_trips(path: Path) -> None:
    persist.save(ENTRIES, path)
    same(persist.load(path), ENTRIES)


def test_an_empty_cache_round_trips(path: Path) -> None:
    persist.save([], path)
    assert persist.load(path) == []
    assert path.exists()


def test_the_file_is_readable_by_its_owner_only(path: Path) -> None:
    persist.save(ENTRIES, path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_an_existing_world_readable_file_becomes_owner_only(path: Path) -> None:
    path.parent.mkdir(parents=True)
    path.write_bytes(b"old")
    path.chmod(0o644)
    persist.save(ENTRIES, path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_no_temporary_file_is_left_behind(path: Path) -> None:
    persist.save(ENTRIES, path)
    persist.save(ENTRIES[:1], path)
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
    same(persist.load(path), ENTRIES[:1])


def test_save_creates_the_directory(tmp_path: Path) -> None:
    deep = tmp_path / "a" / "b" / "cache.jsonl"
    persist.save(ENTRIES, deep)
    same(persist.load(deep), ENTRIES)


def test_a_missing_file_is_an_empty_cache(path: Path) -> None:
    assert persist.load(path) == []
    assert not path.parent.exists() or not list(path.parent.iterdir())


def test_a_save_that_fails_midway_keeps_the_last_good_copy(path: Path) -> None:
    persist.save(ENTRIES, path)
    broken = [*ENTRIES, entry("bad", b"\xff\xfe not utf-8", None)]
    with contextlib.suppress(Exception):
        persist.save(broken, path)
    same(persist.load(path), ENTRIES)


def good_file() -> bytes:
    lines = [persist.FORMAT] + [
        orjson.dumps(
            {
                "scope": "s",
                "exact": f"e{i}",
                "context": None,
                "query": None,
                "answer": "{}",
                "created": 1.0,
                "expires": 2.0,
                "vector": None,
            }
        )
        for i in range(3)
    ]
    return b"\n".join(lines) + b"\n"


def test_the_hand_written_good_file_loads(path: Path) -> None:
    path.parent.mkdir(parents=True)
    path.write_bytes(good_file())
    assert [e.keys.exact for e in persist.load(path)] == ["e0", "e1", "e2"]
    assert not path.with_name(path.name + ".corrupt").exists()


CORRUPT = {
    "garbage": b"\x00\x01\x02 this is not a cache \xff\n\x89PNG\n",
    "empty": b"",
    "wrong header": b"some-other-format 1\n" + good_file().split(b"\n", 1)[1],
    "another version": b"overspill-cache 2\n" + good_file().split(b"\n", 1)[1],
    "truncated line": good_file()[:-25],
    "not json": persist.FORMAT + b"\n{not json}\n",
    "missing field": persist.FORMAT + b'\n{"scope": "s", "exact": "e"}\n',
    "a list": persist.FORMAT + b"\n[1, 2, 3]\n",
    "bad times": good_file().replace(b'"created":1.0', b'"created":"yesterday"', 1),
    "bad vector": good_file().replace(b'"vector":null', b'"vector":"abc"', 1),
}


@pytest.mark.parametrize("content", CORRUPT.values(), ids=CORRUPT.keys())
def test_a_corrupted_file_is_moved_aside_and_the_cache_starts_empty(
    path: Path, content: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    with caplog.at_level(logging.WARNING, logger="overspill"):
        assert persist.load(path) == []
    aside = path.with_name(path.name + ".corrupt")
    assert aside.read_bytes() == content  # the evidence is kept
    assert not path.exists()
    assert str(path) in caplog.text
    assert persist.load(path) == []  # and the next start is clean


def test_after_a_corrupted_file_the_next_save_works(path: Path) -> None:
    path.parent.mkdir(parents=True)
    path.write_bytes(b"garbage")
    assert persist.load(path) == []
    persist.save(ENTRIES, path)
    same(persist.load(path), ENTRIES)


async def test_a_loaded_cache_answers_exact_and_semantic_lookups(path: Path) -> None:
    class Embedder:
        ready = True

        def warm(self) -> None:
            pass

        async def embed(self, text: str) -> np.ndarray:
            return {
                "How do I reverse a list?": vector(1, 0, 0),
                "How to reverse a list?": vector(0.97, 0.243, 0),
            }[text]

    def keys(question: str) -> CacheKeys:
        body = {"messages": [{"role": "user", "content": question}], "temperature": 0}
        return cache_keys("chat", body, "acme", "llama", "v1")

    rule = CacheRule(threshold=0.9)
    now = 5_000.0
    first = AnswerCache(Embedder(), lambda: now)
    await first.insert(keys("How do I reverse a list?"), rule, b'{"answer":1}')
    persist.save(first.entries(), path)

    second = AnswerCache(Embedder(), lambda: now + 10)
    second.restore(persist.load(path))
    assert await second.lookup(keys("How do I reverse a list?"), rule, False) == Hit(
        "exact", b'{"answer":1}', 1.0
    )
    found = await second.lookup(keys("How to reverse a list?"), rule, semantic=True)
    assert isinstance(found, Hit)
    assert found.kind == "semantic"
    assert found.answer == b'{"answer":1}'
