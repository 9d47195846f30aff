"""Who may be served a similar question's answer (issue 30): the semantic layer for callers
with a key, never for personal data, and the similarity told only in a caller's own scope. The
real Pipeline with scripted engines and a fake embedder (no verifier: the guard decides)."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.flow.caching import Answers
from tests.unit.cache.test_store import PARAPHRASE, QUESTION, VECTORS, FakeEmbedder, around
from tests.unit.proxy.pipeline_harness import POLICY, Harness, chat_answer, harness
from tests.unit.proxy.test_pipeline_branches import bearer, key_digest

KEYED = (
    POLICY
    + f"""
[[tenants]]
name = "acme"
api_keys = ["{key_digest("sk-acme-unit-key")}"]
"""
)
SHARED = KEYED + "\n[cache]\nsemantic_unkeyed = true\n"
FIRST = "Draft a short reply; my email is jsmith@corp.exemplo.net"
OTHER = FIRST.replace("jsmith", "mjones")  # another caller's address on the same domain


def asked(text: str) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": text}], "temperature": 0}


async def with_stored(policy: str, question: str, headers: dict[str, str]) -> Harness:
    answers = Answers(
        embedder=FakeEmbedder({**VECTORS, FIRST: VECTORS[QUESTION], OTHER: around(0.97)})
    )
    engines = {"a": [chat_answer("engine")] * 4, "b": [chat_answer("engine")] * 4}
    h = harness(engines, policy, answers)
    assert (await h.send(asked(question), headers)).headers["x-overspill-cache"] == "miss"
    await answers.settle()
    return h


async def test_a_caller_with_a_key_is_served_a_paraphrase_and_told_how_near() -> None:
    h = await with_stored(KEYED, QUESTION, bearer("sk-acme-unit-key"))
    sent = await h.send(asked(PARAPHRASE), bearer("sk-acme-unit-key"))
    assert sent.headers["x-overspill-cache"] == "hit-semantic"
    assert float(sent.headers["x-overspill-cache-similarity"]) > 0.9


async def test_callers_without_a_key_share_only_exact_answers_by_default() -> None:
    h = await with_stored(KEYED, QUESTION, {})
    assert (await h.send(asked(PARAPHRASE))).headers["x-overspill-cache"] == "miss"
    assert (await h.send(asked(QUESTION))).headers["x-overspill-cache"] == "hit-exact"


async def test_where_unkeyed_callers_share_paraphrases_they_are_not_told_how_near() -> None:
    """The similarity would tell whoever planted an answer that it took."""
    h = await with_stored(SHARED, QUESTION, {})
    sent = await h.send(asked(PARAPHRASE))
    assert sent.headers["x-overspill-cache"] == "hit-semantic"
    assert "x-overspill-cache-similarity" not in sent.headers


async def test_a_question_with_personal_data_is_never_served_anothers_answer() -> None:
    """Another address on the same domain was served the first caller's answer, with their
    address in it (issue 30): a request the detectors find personal data in is exact only."""
    detecting = SHARED + '\n[privacy.detectors]\nemail = "public"\n'
    for policy, served in ((SHARED, "hit-semantic"), (detecting, "miss")):
        h = await with_stored(policy, FIRST, bearer("sk-acme-unit-key"))
        sent = await h.send(asked(OTHER), bearer("sk-acme-unit-key"))
        assert sent.headers["x-overspill-cache"] == served  # without a detector: served
    again = await h.send(asked(FIRST), bearer("sk-acme-unit-key"))
    assert again.headers["x-overspill-cache"] == "hit-exact"


async def test_a_long_bodys_cache_keys_are_computed_off_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The keys digest the whole body as sorted JSON (~30 ms at 4 MB): past the parse's offload
    threshold, in a worker thread; a short body's, where it is."""
    import threading

    import proxy.flow.caching as caching_module
    from policies.loader import parse_policy
    from proxy.flow.caller import OFFLOAD_PARSE_BYTES
    from tests.unit.proxy.test_offload import sized

    threads: list[str] = []
    real = caching_module.cache_keys

    def recorded(*args: Any) -> Any:
        threads.append(threading.current_thread().name)
        return real(*args)

    monkeypatch.setattr(caching_module, "cache_keys", recorded)
    policy = parse_policy(KEYED)
    answers = Answers()
    for size in (OFFLOAD_PARSE_BYTES - 1, OFFLOAD_PARSE_BYTES):
        request = sized(size)
        request.body["temperature"] = 0
        await answers.caching(policy, request, "public", "acme", "")
    assert threads[0] == threading.main_thread().name
    assert threads[1] != threading.main_thread().name
