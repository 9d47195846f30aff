"""The answer cache and in-flight coalescing through the real proxy, in front of a simulator that
counts what reached it: real processes, the official openai SDK and httpx."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.processes import FAST_ENGINE, Process, backend_toml, proxy, sim
from tests.waits import eventually, held, status, wait_until

MODEL = ("--model", "sim-model")
FAST = (*FAST_ENGINE, *MODEL)
SLOW = ("--decode-base-ms", "20", "--prefill-ms-per-token", "0.01", *MODEL)
ONE_SEQUENCE = (*SLOW, "--max-seqs", "1")  # a 5,000-token stream holds it for 100 s


# Tenants the tests name: only a declared tenant has a cache scope of its own. The semantic
# layer serves callers with a key (acme's); globex is named by its header alone.
ACME_KEY = "sk-acme-cache-test"


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


TENANTS = (
    f'[[tenants]]\nname = "acme"\napi_keys = ["sha256:{_digest(ACME_KEY)}"]\n'
    '[[tenants]]\nname = "globex"\n'
)


def config(engine: str, extra: str = "") -> str:
    return (
        f"[server]\nprobe_interval_s = 0.2\n{backend_toml('local', 'vllm', engine)}{TENANTS}{extra}"
    )


def received(engine: Process) -> int:
    return int(httpx.get(engine.url + "/_sim/stats").json()["requests"])


def ask(url: str, content: str, tenant: str = "", **extra: object) -> httpx.Response:
    body = {
        "model": "sim-model",
        "messages": [{"role": "user", "content": content}],
        "temperature": 0,
        "max_tokens": 12,
        **extra,
    }
    headers = {"x-overspill-tenant": tenant} if tenant else {}
    if tenant == "acme":
        headers["authorization"] = f"Bearer {ACME_KEY}"
    return httpx.post(url + "/v1/chat/completions", json=body, headers=headers, timeout=30)


# What the cache decides, alone: without speculation a fast simulator's answer cannot come
# before the verifier's verdict (speculation is tested apart, with an engine that cannot).
CACHE_DECIDES = "[cache]\nspeculate = false\n"


@contextlib.contextmanager
def stack(
    extra: str = "", engine_args: tuple[str, ...] = FAST
) -> Iterator[tuple[Process, Process]]:
    with sim(*engine_args) as engine, proxy(config(engine.url, extra)) as p:
        yield p, engine


def stored(url: str, count: int = 1) -> None:
    """Answers are stored just after they are sent: wait until `count` are."""
    wait_until(lambda: status(url)["cache"]["entries"] >= count, f"{count} answers stored")


@contextlib.contextmanager
def engine_busy(engine: Process) -> Iterator[None]:
    """The engine's only sequence (--max-seqs 1) taken by a long stream sent to it directly:
    whatever the proxy sends it meanwhile waits in its queue until the block ends."""
    body = {
        "model": "sim-model",
        "messages": [{"role": "user", "content": "busy"}],
        "max_tokens": 5000,
        "stream": True,
    }
    with held(engine.url, body):
        yield


async def coalesced(client: httpx.AsyncClient, url: str, joined: int) -> bool:
    """`joined` requests found one identical request's upstream call under way, and rode it."""
    cache = (await client.get(url + "/admin/status")).json()["cache"]
    return bool(cache["coalesced"] == joined and cache["in_flight_shared"] == 1)


def test_a_repeated_request_is_answered_from_the_cache() -> None:
    with stack() as (p, engine):
        first = ask(p.url, "What is the capital of France?")
        assert first.status_code == 200
        assert first.headers["x-overspill-cache"] == "miss"
        stored(p.url)
        before = received(engine)
        again = ask(p.url, "What is the capital of France?")
        assert again.status_code == 200
        assert again.headers["x-overspill-cache"] == "hit-exact"
        assert again.headers["x-overspill-route"] == "cache"
        assert received(engine) == before  # nothing reached the engine
        one, two = first.json(), again.json()
        assert two["choices"][0]["message"] == one["choices"][0]["message"]
        assert two["usage"] == one["usage"]
        assert two["id"] != one["id"]


def test_a_cached_answer_is_replayed_to_a_streaming_client_and_a_stream_is_cached() -> None:
    with stack() as (p, engine):
        client = openai.OpenAI(base_url=p.url + "/v1", api_key="k", max_retries=0)
        messages = [{"role": "user", "content": "Name three colours."}]
        whole = client.chat.completions.create(
            model="sim-model",
            messages=messages,  # type: ignore[arg-type]
            temperature=0,
            max_tokens=12,
        )
        stored(p.url)
        before = received(engine)
        with client.chat.completions.with_streaming_response.create(
            model="sim-model",
            messages=messages,
            temperature=0,
            max_tokens=12,
            stream=True,  # type: ignore[arg-type]
            stream_options={"include_usage": True},
        ) as response:
            assert response.headers["x-overspill-cache"] == "hit-exact"
            chunks = list(response.parse())
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == whole.choices[0].message.content
        assert chunks[-1].usage is not None
        assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens  # type: ignore[union-attr]
        assert received(engine) == before

        # the other way: a streamed answer is stored once complete, then served whole (it
        # asked for usage, which a whole answer must carry: test_cache_replay.py has the rest)
        stream = client.chat.completions.create(
            model="sim-model",
            messages=[{"role": "user", "content": "Count to five."}],
            temperature=0,
            max_tokens=10,
            stream=True,
            stream_options={"include_usage": True},
        )
        streamed = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        stored(p.url, 2)
        hit = ask(p.url, "Count to five.", max_tokens=10)
        assert hit.headers["x-overspill-cache"] == "hit-exact"
        assert hit.json()["choices"][0]["message"]["content"] == streamed


def test_what_is_not_cacheable_bypasses_the_cache() -> None:
    with stack() as (p, _engine):
        hot = ask(p.url, "Tell me a story.", temperature=0.8)
        assert hot.headers["x-overspill-cache"] == "bypass"
        unset = httpx.post(
            p.url + "/v1/chat/completions",
            json={"model": "sim-model", "messages": [{"role": "user", "content": "hi"}]},
            timeout=30,
        )
        assert unset.headers["x-overspill-cache"] == "bypass"
        tools = ask(p.url, "Weather?", tools=[{"type": "function", "function": {"name": "w"}}])
        assert tools.headers["x-overspill-cache"] == "bypass"


def test_cache_control_no_store_and_no_cache() -> None:
    with stack() as (p, engine):
        body = {
            "model": "sim-model",
            "messages": [{"role": "user", "content": "2+2?"}],
            "temperature": 0,
            "max_tokens": 5,
        }
        url = p.url + "/v1/chat/completions"
        first = httpx.post(url, json=body, headers={"cache-control": "no-store"})
        assert first.headers["x-overspill-cache"] == "bypass"
        time.sleep(0.2)  # time for a wrong store to show (the right behaviour never needs it)
        second = httpx.post(url, json=body)
        assert second.headers["x-overspill-cache"] == "miss"  # no-store kept nothing
        stored(p.url)
        before = received(engine)
        fresh = httpx.post(url, json=body, headers={"cache-control": "no-cache"})
        assert fresh.headers["x-overspill-cache"] == "bypass"  # looked up nothing ...
        assert received(engine) == before + 1  # ... and asked the engine
        assert httpx.post(url, json=body).headers["x-overspill-cache"] == "hit-exact"


def test_tenants_never_share_answers() -> None:
    with stack() as (p, engine):
        ask(p.url, "What is our refund policy?", tenant="acme")
        stored(p.url)
        before = received(engine)
        theirs = ask(p.url, "What is our refund policy?", tenant="globex")
        assert theirs.headers["x-overspill-cache"] == "miss"
        nobody = ask(p.url, "What is our refund policy?")
        assert nobody.headers["x-overspill-cache"] == "miss"
        assert received(engine) == before + 2
        assert (
            ask(p.url, "What is our refund policy?", tenant="acme").headers["x-overspill-cache"]
            == "hit-exact"
        )


def test_an_invented_tenant_name_gets_no_scope_of_its_own() -> None:
    """A name no policy declares can be claimed by anyone: it isolates nothing, so it shares
    the anonymous scope, and inventing names never creates scopes."""
    with stack() as (p, engine):
        ask(p.url, "What is our refund policy?", tenant="made-up-1")
        stored(p.url)
        before = received(engine)
        for name in ("made-up-2", "made-up-3", ""):
            again = ask(p.url, "What is our refund policy?", tenant=name)
            assert again.headers["x-overspill-cache"] == "hit-exact"
        assert received(engine) == before
        declared = ask(p.url, "What is our refund policy?", tenant="acme")
        assert declared.headers["x-overspill-cache"] == "miss"


def test_restricted_requests_are_cached_only_as_the_policy_allows() -> None:
    levels = """
[privacy]
levels = [{ name = "public" }, { name = "internal", cloud = "none", cache = "tenant" },
          { name = "restricted", cloud = "none", cache = "none" }]
"""
    with stack(levels) as (p, _):

        def twice(level: str, tenant: str = "", kept: bool = False) -> str:
            body = {
                "model": "sim-model",
                "temperature": 0,
                "max_tokens": 5,
                "messages": [{"role": "user", "content": f"secret plan {level} {tenant}"}],
            }
            headers = {"x-overspill-privacy": level, "x-overspill-tenant": tenant}
            if tenant == "acme":
                headers["authorization"] = f"Bearer {ACME_KEY}"
            url = p.url + "/v1/chat/completions"
            httpx.post(url, json=body, headers=headers)
            if kept:  # the only answer the cache keeps: wait for it (a bypass looks nothing up)
                stored(p.url)
            return httpx.post(url, json=body, headers=headers).headers["x-overspill-cache"]

        assert twice("restricted", "acme") == "bypass"
        assert twice("internal") == "bypass"  # no tenant: no private scope to keep it in
        assert twice("internal", "acme", kept=True) == "hit-exact"
        assert status(p.url)["cache"]["entries"] == 1


def test_the_cache_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "answers"
    extra = f'[cache]\npath = "{path}"\nsave_interval_s = 0.2\n'
    with sim(*FAST) as engine:
        with proxy(config(engine.url, extra)) as p:
            first = ask(p.url, "What is the boiling point of water?")
            assert first.headers["x-overspill-cache"] == "miss"
            stored(p.url)  # then saved, at the latest when the proxy stops
        assert path.exists()
        with proxy(config(engine.url, extra)) as p:
            before = received(engine)
            again = ask(p.url, "What is the boiling point of water?")
            assert again.headers["x-overspill-cache"] == "hit-exact"
            assert again.json()["choices"] == first.json()["choices"]
            assert received(engine) == before
        path.write_bytes(b"garbage\x00")
        with proxy(config(engine.url, extra)) as p:  # a corrupted store is not fatal
            assert ask(p.url, "What is the boiling point of water?").status_code == 200
        assert path.with_name("answers.corrupt").exists()


def test_a_new_model_behind_the_public_name_invalidates_its_answers(tmp_path: Path) -> None:
    path = tmp_path / "answers"
    extra = f'[cache]\npath = "{path}"\n'
    with sim(*FAST_ENGINE, "--model", "m-v1", "--model", "m-v2") as engine:
        one = backend_toml("local", "vllm", engine.url, {"m": "m-v1"}) + extra
        two = backend_toml("local", "vllm", engine.url, {"m": "m-v2"}) + extra
        body = {
            "model": "m",
            "messages": [{"role": "user", "content": "hello"}],
            "temperature": 0,
            "max_tokens": 5,
        }
        with proxy(one) as p:
            httpx.post(p.url + "/v1/chat/completions", json=body)
            stored(p.url)
        with proxy(two) as p:
            answer = httpx.post(p.url + "/v1/chat/completions", json=body)
            assert answer.headers["x-overspill-cache"] == "miss"
        with proxy(one) as p:
            answer = httpx.post(p.url + "/v1/chat/completions", json=body)
            assert answer.headers["x-overspill-cache"] == "hit-exact"


@pytest.mark.parametrize("stream", [False, True])
def test_fifty_identical_requests_make_one_upstream_call(stream: bool) -> None:
    """Fifty identical requests while the first one's upstream call waits for the engine (its
    only sequence is taken): all ride that one call. Held until all have joined, the call
    cannot end before the last arrives, however slowly they come."""
    with stack(engine_args=ONE_SEQUENCE) as (p, engine):
        body = {
            "model": "sim-model",
            "temperature": 0,
            "max_tokens": 20,
            "stream": stream,
            "messages": [{"role": "user", "content": f"Explain coalescing {stream}"}],
        }

        async def one(client: httpx.AsyncClient) -> str:
            response = await client.post(p.url + "/v1/chat/completions", json=body, timeout=60)
            assert response.status_code == 200
            if not stream:
                return str(response.json()["choices"][0]["message"]["content"])
            assert response.text.rstrip().endswith("data: [DONE]")
            return "".join(
                json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
                for line in response.text.splitlines()
                if line.startswith("data: {") and '"choices":[{' in line
            )

        async def all_of_them() -> tuple[int, list[str]]:
            async with httpx.AsyncClient(limits=httpx.Limits(max_connections=100)) as client:
                with engine_busy(engine):
                    before = received(engine)
                    riders = [asyncio.create_task(one(client)) for _ in range(50)]
                    await eventually(lambda: coalesced(client, p.url, 49), "49 riders joined")
                return before, await asyncio.gather(*riders)

        before, answers = asyncio.run(all_of_them())
        assert received(engine) == before + 1
        assert len(set(answers)) == 1
        assert answers[0]  # a complete, non-empty answer for all 50


def test_nondeterministic_requests_are_not_coalesced_unless_the_policy_says_so() -> None:
    body = {
        "model": "sim-model",
        "temperature": 0.9,
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "A poem"}],
    }

    async def burst(url: str, engine: Process | None = None) -> None:
        """Five at once; with `engine`, held until four have joined the first one's call."""
        async with httpx.AsyncClient() as client:
            if engine is None:
                await asyncio.gather(
                    *(
                        client.post(url + "/v1/chat/completions", json=body, timeout=30)
                        for _ in range(5)
                    )
                )
                return
            with engine_busy(engine):
                posts = [
                    asyncio.create_task(
                        client.post(url + "/v1/chat/completions", json=body, timeout=60)
                    )
                    for _ in range(5)
                ]
                await eventually(lambda: coalesced(client, url, 4), "4 riders joined")
            await asyncio.gather(*posts)

    with stack(engine_args=SLOW) as (p, engine):
        before = received(engine)
        asyncio.run(burst(p.url))
        assert received(engine) == before + 5
    extra = "[cache]\ncoalesce_nondeterministic = true\n"
    with stack(extra, engine_args=ONE_SEQUENCE) as (p, engine):
        before = received(engine)
        asyncio.run(burst(p.url, engine))
        assert received(engine) == before + 2  # the stream that kept it busy, and one call


def searchable(url: str, count: int) -> None:
    """`count` questions embedded, and the referee of borderline similarities (or the answer
    verifier) loaded."""

    def ready() -> bool:
        cache = status(url)["cache"]
        loaded = cache["referee_ready"] is not False and cache["verifier_ready"] is not False
        return bool(cache["searchable"] >= count and loaded)

    # the first question loads the embedding models: seconds, more on a busy machine
    wait_until(ready, f"the semantic layer holds {count} questions", timeout=100)


def test_paraphrases_hit_the_semantic_layer_and_near_misses_do_not() -> None:
    # A threshold low enough that the near-misses below are similar enough (cosine 0.88 and
    # 0.89 with the int8 model): only the guard stands between them and a wrong answer.
    with stack(CACHE_DECIDES + "threshold = 0.85\n") as (p, engine):
        first = ask(p.url, "What is the capital of France?", tenant="acme")
        assert first.headers["x-overspill-cache"] == "miss"
        searchable(p.url, 1)
        before = received(engine)
        paraphrase = ask(p.url, "what's the capital of france", tenant="acme")
        assert paraphrase.headers["x-overspill-cache"] == "hit-semantic"
        assert float(paraphrase.headers["x-overspill-cache-similarity"]) >= 0.8
        assert paraphrase.json()["choices"] == first.json()["choices"]
        assert received(engine) == before
        germany = ask(p.url, "What is the capital of Germany?", tenant="acme")
        assert germany.headers["x-overspill-cache"] == "miss"
        assert received(engine) == before + 1

        ask(p.url, "Convert 5 miles to kilometres.", tenant="acme")
        searchable(p.url, 3)
        fifty = ask(p.url, "Convert 50 miles to kilometres.", tenant="acme")
        assert fifty.headers["x-overspill-cache"] == "miss"
        ask(p.url, "Summarise chapter 3 of the book.", tenant="acme")
        searchable(p.url, 5)
        # cosine 0.98, another chapter
        four = ask(p.url, "Summarise chapter 4 of the book.", tenant="acme")
        assert four.headers["x-overspill-cache"] == "miss"
        status = httpx.get(p.url + "/admin/status").json()["cache"]
        assert status["refused"] >= 2  # similar enough, refused by the guard
        # another tenant never gets a semantic hit either
        other = ask(p.url, "what's the capital of france", tenant="globex")
        assert other.headers["x-overspill-cache"] == "miss"


def test_the_verifier_turns_down_a_swapped_word_the_guard_lets_through() -> None:
    """One plain noun swapped ("book" / "course", cosine 0.85) is what the guard's word tables
    cannot see: without the verifier, at a threshold it passes, the near-miss is served the
    book's answer; with it (the default), the near-miss goes to the engine while a paraphrase is
    still served."""
    book = "What is a good book on machine learning?"
    course = "What is a good course on machine learning?"
    with stack(CACHE_DECIDES) as (p, engine):
        ask(p.url, book, tenant="acme")
        searchable(p.url, 1)
        before = received(engine)
        assert ask(p.url, course, tenant="acme").headers["x-overspill-cache"] == "miss"
        assert received(engine) == before + 1
        paraphrase = ask(p.url, "whats a good book on machine learning", tenant="acme")
        assert paraphrase.headers["x-overspill-cache"] == "hit-semantic"
        assert received(engine) == before + 1
        cache = status(p.url)["cache"]
        assert cache["disagreed"] >= 1
        assert cache["verified"] >= 2
    with stack("[cache]\nverifier = false\nthreshold = 0.8\n") as (p, engine):
        ask(p.url, book, tenant="acme")
        searchable(p.url, 1)
        assert ask(p.url, course, tenant="acme").headers["x-overspill-cache"] == "hit-semantic"


def test_a_verified_hit_withdraws_the_request_it_started_at_the_engine() -> None:
    """Speculation, the default: while the verifier reads, the engine is asked too, and the
    first to finish decides. Here every request hangs at the engine (a fault), so the verifier
    comes first: its hit is served, and the request it started is withdrawn from the engine."""
    book = "What is a good book on machine learning?"
    with stack() as (p, engine):
        first = ask(p.url, book, tenant="acme")
        searchable(p.url, 1)
        httpx.post(engine.url + "/_sim/faults", json={"hang_s": 600}).raise_for_status()
        before = httpx.get(engine.url + "/_sim/stats").json()
        paraphrase = ask(p.url, "whats a good book on machine learning", tenant="acme")
        assert paraphrase.headers["x-overspill-cache"] == "hit-semantic"
        assert paraphrase.json()["choices"] == first.json()["choices"]

        def withdrawn() -> bool:  # the proxy asked, then went away while the engine hung
            now = httpx.get(engine.url + "/_sim/stats").json()
            return bool(now["disconnects"] == before["disconnects"] + 1)

        wait_until(withdrawn, "the proxy withdrew its request from the engine")
        cache = status(p.url)["cache"]
        assert (cache["speculated"], cache["withdrawn"], cache["overtaken"]) == (1, 1, 0)
        metrics = httpx.get(p.url + "/metrics").text
        assert 'overspill_cache_speculations_total{first="hit"} 1.0' in metrics

        # the same, streamed through the official SDK: the stored answer replayed
        client = openai.OpenAI(base_url=p.url + "/v1", api_key=ACME_KEY, max_retries=0)
        stream = client.chat.completions.create(
            model="sim-model",
            messages=[{"role": "user", "content": "whats a good book on machine learning"}],
            temperature=0,
            max_tokens=12,
            stream=True,
        )
        text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
        assert text == first.json()["choices"][0]["message"]["content"]
        wait_until(lambda: status(p.url)["cache"]["withdrawn"] == 2, "the second one withdrawn")


def test_a_question_typed_in_a_hurry_is_served_and_a_typo_hides_no_difference() -> None:
    """Through the official openai SDK: typos are mended toward the stored questions' words
    before the search ("chnage my profle", cosine 0.63 as typed, finds its question), and the
    guard reads the pair again corrected, so "witout" is "without": a question about cooking
    without an oven is not served the answer about cooking with one."""
    with stack(CACHE_DECIDES) as (p, engine):
        client = openai.OpenAI(base_url=p.url + "/v1", api_key=ACME_KEY, max_retries=0)

        def asked(question: str) -> tuple[str, str]:
            raw = client.chat.completions.with_raw_response.create(
                model="sim-model",
                messages=[{"role": "user", "content": question}],
                temperature=0,
                max_tokens=12,
            )
            return raw.headers["x-overspill-cache"], raw.parse().choices[0].message.content or ""

        _, profile = asked("How do I change my profile picture?")
        _, oven = asked("What dishes can I make with an oven?")
        searchable(p.url, 2)
        before = received(engine)
        assert asked("how do i chnage my profle picture") == ("hit-semantic", profile)
        assert received(engine) == before
        kind, answer = asked("what dishes can i make witout an oven")
        assert kind == "miss"
        assert answer != oven
        assert received(engine) == before + 1
        cache = status(p.url)["cache"]
        assert cache["refused"] >= 1  # by the guard, on the corrected reading


def test_a_different_system_prompt_is_never_a_semantic_hit() -> None:
    # without the verifier, so that the threshold decides and the referee settles the pair
    with stack("[cache]\nverifier = false\n") as (p, _):

        def ask_as(system: str, question: str) -> httpx.Response:
            return ask(
                p.url,
                question,
                tenant="acme",
                messages=[
                    {"role": "system", "content": system},
                    {"role": "user", "content": question},
                ],
            )

        ask_as("You are a pirate.", "What is the capital of France?")
        searchable(p.url, 1)
        hit = ask_as("You are a pirate.", "what's the capital of france")
        assert hit.headers["x-overspill-cache"] == "hit-semantic"
        # int8 puts this pair at 0.909, within the margin of 0.90: the fp32 referee settled it
        # (0.908), and the similarity reported is the reference's.
        assert httpx.get(p.url + "/admin/status").json()["cache"]["refereed"] == 1
        assert float(hit.headers["x-overspill-cache-similarity"]) == pytest.approx(0.9078, abs=2e-4)
        assert (
            ask_as("You are a poet.", "what's the capital of france").headers["x-overspill-cache"]
            == "miss"
        )
