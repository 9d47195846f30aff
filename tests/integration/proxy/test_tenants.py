"""Tenants through the real proxy: API keys (401/403), allowed models, and per-tenant limits
(429 with Retry-After and the limit named) while another tenant goes on unaffected. Real
processes: a simulator behind the proxy, driven by the official openai SDK and httpx."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest

from policies.apikeys import digest
from tests.processes import (
    FAST_ENGINE,
    ROOT,
    Process,
    backend_toml,
    cloud_toml,
    engine_flags,
    overspill_command,
    proxy,
    sim,
)
from tests.waits import eventually, held, wait_until

ACME_KEY = "sk-acme-0123456789"  # declared by its SHA-256
GLOBEX_KEY = "sk-globex-abcdef"  # declared by an environment variable
ADMIN_KEY = "sk-admin-42"
MODEL = ("--model", "sim-model")


def config(engine: str, tenants: str, auth: str = "", cache: bool = False) -> str:
    return (
        f"[server]\nprobe_interval_s = 0.2\n{backend_toml('local', 'vllm', engine)}"
        f"[cache]\nenabled = {str(cache).lower()}\n{auth}{tenants}"
    )


KEYED = f"""
[[tenants]]
name = "acme"
api_keys = ["sha256:{digest(ACME_KEY)}"]
models = ["sim-model"]

[[tenants]]
name = "globex"
api_keys = ["env:GLOBEX_KEY"]
"""


@contextlib.contextmanager
def stack(
    tenants: str,
    auth: str = "",
    engine_args: tuple[str, ...] = (*FAST_ENGINE, *MODEL),
    cache: bool = False,
) -> Iterator[Process]:
    with (
        sim(*engine_args) as engine,
        proxy(config(engine.url, tenants, auth, cache), env={"GLOBEX_KEY": GLOBEX_KEY}) as p,
    ):
        yield p


def client(url: str, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)


def chat(
    url: str, key: str = "", tenant: str = "", max_tokens: int = 8, **extra: object
) -> httpx.Response:
    headers = {"authorization": f"Bearer {key}"} if key else {}
    if tenant:
        headers["x-overspill-tenant"] = tenant
    body: dict[str, object] = {
        "model": "sim-model",
        "messages": [{"role": "user", "content": "hello"}],
    }
    if max_tokens:
        body["max_tokens"] = max_tokens
    body.update(extra)
    return httpx.post(url + "/v1/chat/completions", json=body, headers=headers, timeout=30)


def openai_error(response: httpx.Response) -> dict[str, object]:
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return dict(error)


# --- keys -----------------------------------------------------------------------------------


def test_required_keys_admit_the_sdk_with_a_declared_key_and_refuse_the_rest() -> None:
    with stack(KEYED, "[auth]\nrequire_keys = true\n") as p:
        answer = client(p.url, ACME_KEY).chat.completions.create(
            model="sim-model", messages=[{"role": "user", "content": "hi"}], max_tokens=4
        )
        assert answer.choices[0].message.content
        assert chat(p.url, GLOBEX_KEY).status_code == 200  # the env-declared key
        with pytest.raises(openai.AuthenticationError) as refused:
            client(p.url, "sk-not-ours").chat.completions.create(
                model="sim-model", messages=[{"role": "user", "content": "hi"}]
            )
        assert refused.value.status_code == 401
        missing = chat(p.url)
        assert missing.status_code == 401
        assert "Authorization: Bearer" in str(openai_error(missing)["message"])
        named = chat(p.url, tenant="acme")  # a header alone is no key
        assert named.status_code == 401


def test_an_unknown_caller_is_refused_before_its_body_is_read() -> None:
    with stack(KEYED, "[auth]\nrequire_keys = true\n") as p:
        garbage = httpx.post(p.url + "/v1/chat/completions", content=b"[" * 10_000, timeout=30)
        assert garbage.status_code == 401  # not a 400 about the body: it was never parsed
        keyed = httpx.post(
            p.url + "/v1/chat/completions",
            content=b"[" * 10_000,
            timeout=30,
            headers={"authorization": f"Bearer {ACME_KEY}"},
        )
        assert keyed.status_code == 400


def test_a_key_of_one_tenant_cannot_act_as_another() -> None:
    with stack(KEYED) as p:
        response = chat(p.url, ACME_KEY, tenant="globex")
        assert response.status_code == 403
        error = openai_error(response)
        assert error["code"] == "wrong_tenant"
        assert "acme" in str(error["message"])


def test_optional_keys_still_protect_the_tenants_that_have_them() -> None:
    """Without require_keys, SDK dummy keys pass, undeclared tenants may be named, but a
    tenant with keys cannot be claimed by header alone."""
    with stack(KEYED + '\n[[tenants]]\nname = "open"\n') as p:
        assert chat(p.url, "sk-dummy").status_code == 200
        assert chat(p.url, "sk-dummy", tenant="open").status_code == 200
        assert chat(p.url, tenant="someone-new").status_code == 200
        assert chat(p.url, tenant="acme").status_code == 401
        assert chat(p.url, ACME_KEY, tenant="acme").status_code == 200


def test_a_tenant_may_use_only_its_models() -> None:
    tenants = KEYED.replace('models = ["sim-model"]', 'models = ["other-model"]')
    with stack(tenants) as p:
        response = chat(p.url, ACME_KEY)
        assert response.status_code == 403
        error = openai_error(response)
        assert (error["code"], error["param"]) == ("model_not_allowed", "model")
        assert chat(p.url, GLOBEX_KEY).status_code == 200


def test_admin_endpoints_need_the_admin_key_when_one_is_set(tmp_path: Path) -> None:
    auth = f'[auth]\nadmin_keys = ["sha256:{digest(ADMIN_KEY)}"]\n'
    with stack(KEYED, auth) as p:
        assert httpx.get(p.url + "/admin/status").status_code == 401
        tenant_key = {"authorization": f"Bearer {ACME_KEY}"}
        assert httpx.get(p.url + "/admin/status", headers=tenant_key).status_code == 401
        admin = {"authorization": f"Bearer {ADMIN_KEY}"}
        assert httpx.get(p.url + "/admin/status", headers=admin).status_code == 200
        assert httpx.get(p.url + "/healthz").status_code == 200  # probes stay open
        assert httpx.get(p.url + "/metrics").status_code == 200
        # the explain command asks the running proxy: with the key, or a clear refusal
        request = tmp_path / "request.json"
        request.write_text(
            json.dumps({"model": "sim-model", "messages": [{"role": "user", "content": "x"}]})
        )
        command = [
            *overspill_command(
                "explain", "unused.toml", "--request", str(request), "--proxy", p.url
            )
        ]
        refused = subprocess.run(command, capture_output=True, text=True, check=False, cwd=ROOT)
        assert refused.returncode == 2
        assert "answered 401" in refused.stderr
        assert "Authorization: Bearer" in refused.stderr
        assert "Traceback" not in refused.stderr
        allowed = subprocess.run(
            [*command, "--header", f"Authorization: Bearer {ADMIN_KEY}"],
            capture_output=True,
            text=True,
            check=False,
            cwd=ROOT,
        )
        assert allowed.returncode == 0, allowed.stderr
        assert json.loads(allowed.stdout)["targets"]


# --- limits ---------------------------------------------------------------------------------


# A burst of three, then one request a minute: what the test spends does not refill while it
# runs, however slow the machine. How Retry-After counts a partial refill is
# tests/unit/policies/test_admission.py's, on a fake clock.
ONE_A_MINUTE = 'name = "acme"\nrequests_per_minute = 1\nburst_s = 180'


def test_a_tenant_over_its_request_rate_gets_429_with_retry_after_and_others_do_not() -> None:
    tenants = KEYED.replace('name = "acme"', ONE_A_MINUTE)
    with stack(tenants) as p:
        assert [chat(p.url, ACME_KEY).status_code for _ in range(3)] == [200, 200, 200]
        refused = chat(p.url, ACME_KEY)
        assert refused.status_code == 429
        assert refused.headers["x-overspill-limit"] == "requests_per_minute"
        assert 1 <= int(refused.headers["retry-after"]) <= 60  # within one refill
        error = openai_error(refused)
        assert error["type"] == "rate_limit_error"
        assert "1 requests per minute" in str(error["message"])
        assert "acme" in str(error["message"])
        # meanwhile, another tenant is served
        assert [chat(p.url, GLOBEX_KEY).status_code for _ in range(5)] == [200] * 5
        with pytest.raises(openai.RateLimitError):
            client(p.url, ACME_KEY).chat.completions.create(
                model="sim-model", messages=[{"role": "user", "content": "hi"}]
            )


# Buckets of 1,000 tokens that refill at one token a second (60 a minute, 1,000 s of burst):
# what a test spends, a slow machine does not give back before the test is over.
SLOW_TOKENS = 'name = "acme"\ntokens_per_minute = 60\nburst_s = 1000'


def test_the_token_rate_is_charged_by_estimate_and_corrected_by_usage() -> None:
    """A bucket of 1,000 tokens, requests without max_tokens (estimated at prompt + 256) whose
    answers use about 20: the estimate alone would admit three, the corrections let every one
    through; a request that asks for 900 more than the bucket has left is refused, told to
    come back once the missing tokens have refilled."""
    tenants = KEYED.replace('name = "acme"', SLOW_TOKENS)
    with stack(tenants, engine_args=(*FAST_ENGINE, *MODEL, "--output-tokens", "10")) as p:
        answers = [chat(p.url, ACME_KEY, max_tokens=0) for _ in range(8)]
        assert [answer.status_code for answer in answers] == [200] * 8
        used = sum(answer.json()["usage"]["total_tokens"] for answer in answers)
        big = chat(p.url, ACME_KEY, max_tokens=900)  # charged ~920 on a ~840 level: refused
        assert big.status_code == 429
        assert big.headers["x-overspill-limit"] == "tokens_per_minute"
        message = str(openai_error(big)["message"])
        assert "60 tokens per minute" in message
        wait = float(message.rsplit("retry in ", 1)[1].removesuffix(" s"))
        assert int(big.headers["retry-after"]) == max(1, math.ceil(wait))
        # charged its answer and everything the model reads (the body as JSON, ~4 bytes a token)
        body = {"model": "sim-model", "messages": [{"role": "user", "content": "hello"}]}
        charge = 900 + len(orjson.dumps({**body, "max_tokens": 900})) // 4
        assert 0 < wait <= charge - (1000 - used)  # the tokens missing, at one a second


def test_answers_from_the_cache_cost_no_tokens() -> None:
    """The first answer uses ~410 of 1,000 tokens; the repeats are cache hits, free: charged
    at their estimate (~410 each), the third would already be refused."""
    tenants = KEYED.replace('name = "acme"', SLOW_TOKENS)
    with stack(tenants, cache=True) as p:
        responses = [chat(p.url, ACME_KEY, max_tokens=400, temperature=0) for _ in range(6)]
        assert [r.status_code for r in responses] == [200] * 6
        assert [r.headers["x-overspill-cache"] for r in responses[1:]] == ["hit-exact"] * 5


def test_concurrent_requests_beyond_the_cap_are_refused() -> None:
    """Two of acme's requests held in flight (streams the test keeps open): every other one
    it sends meanwhile is refused; once they are closed, the slots are given back."""
    tenants = KEYED.replace('name = "acme"', 'name = "acme"\nmax_concurrent = 2')
    slow = ("--decode-base-ms", "20", *MODEL)  # a 5,000-token stream lasts 100 s
    headers = {"authorization": f"Bearer {ACME_KEY}"}
    long = {
        "model": "sim-model",
        "messages": [{"role": "user", "content": "x"}],
        "max_tokens": 5000,
        "stream": True,
    }

    async def burst(url: str) -> list[int]:
        async with httpx.AsyncClient(timeout=30) as session:
            body = {
                "model": "sim-model",
                "messages": [{"role": "user", "content": "x"}],
                "max_tokens": 10,
            }
            responses = await asyncio.gather(
                *(
                    session.post(url + "/v1/chat/completions", json=body, headers=headers)
                    for _ in range(3)
                )
            )
            return [r.status_code for r in responses]

    with stack(tenants, engine_args=slow) as p:
        with held(p.url, long, headers), held(p.url, long, headers):
            assert _in_flight(p.url, "acme") == 2
            assert asyncio.run(burst(p.url)) == [429, 429, 429]
        wait_until(lambda: _in_flight(p.url, "acme") == 0, "the held streams were given back")
        assert chat(p.url, ACME_KEY).status_code == 200  # the slots were given back


# --- cloud budgets --------------------------------------------------------------------------

# Every answer exactly 20 tokens: a budget's count of answers must not depend on the simulator's
# random answer lengths (uniform 10-30 by default).
CLOUD = engine_flags(
    personality="cloud", decode_base_ms=1, output_tokens=20, output_distribution="fixed"
)


def budget_policy(engine: str, cloud: str, budget: float, server: str = "") -> str:
    """Model "m" served only by the cloud (gpt-4o-mini's prices in litellm's tables)."""
    return f"""
[server]
probe_interval_s = 0.2
{server}
[retry]
attempts = 1
{backend_toml("local", "vllm", engine, {"sim-model": "sim-model"})}
{cloud_toml("mini", cloud)}[[routes]]
model = "m"
cloud = ["mini"]
[[tenants]]
name = "acme"
cloud_budget_usd = {budget}
budget_period = "day"
[[tenants]]
name = "initech"
cloud_budget_usd = {budget}
[[tenants]]
name = "globex"
"""


def cloud_received(cloud: Process) -> int:
    return len(httpx.get(cloud.url + "/_sim/requests").json()["requests"])


def test_a_tenant_past_its_cloud_budget_is_never_sent_to_the_cloud_again() -> None:
    """Each answer costs about $0.000015 (gpt-4o-mini: ~15 prompt and 20 answer tokens); a
    budget of $0.00004 runs out after three. Streams that did not ask for usage are priced too
    (the proxy asks the provider for it) and still get no usage chunk."""
    with (
        sim(*FAST_ENGINE, *MODEL) as engine,
        sim(*CLOUD) as cloud,
        proxy(budget_policy(engine.url, cloud.url, 0.00004)) as p,
    ):
        sdk = openai.OpenAI(
            base_url=p.url + "/v1",
            api_key="sk-dummy",
            max_retries=0,
            default_headers={"x-overspill-tenant": "acme"},
        )
        served, refusal = 0, None
        for _ in range(10):
            try:
                stream = sdk.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "hello there"}], stream=True
                )
                chunks = list(stream)
            except openai.APIStatusError as refused:
                refusal = refused
                break
            assert all(chunk.usage is None for chunk in chunks)  # not asked, not shown
            served += 1
        assert refusal is not None
        assert refusal.status_code == 503
        assert "budget: tenant 'acme' spent" in refusal.message
        assert served == 3  # 3 x $0.0000143 > $0.00004 > 2 x
        reached = cloud_received(cloud)
        assert reached == served
        for _ in range(5):  # closed for the rest of the day, streamed or not
            assert chat(p.url, tenant="acme", model="m").status_code == 503
        assert cloud_received(cloud) == reached
        assert chat(p.url, tenant="globex", model="m").status_code == 200  # others still do
        assert cloud_received(cloud) == reached + 1
        reason = chat(p.url, tenant="acme", model="m").headers.get("x-overspill-reason", "")
        assert reason.startswith("budget: tenant 'acme'")
        # whole answers are priced as they come: 8-token answers cost ~$0.0000063, six fit
        statuses = [chat(p.url, tenant="initech", model="m").status_code for _ in range(12)]
        assert 5 <= statuses.count(200) <= 8
        assert statuses == sorted(statuses)  # served until the budget ran out, then refused


def test_a_spent_budget_stays_spent_across_a_restart(tmp_path: Path) -> None:
    ledger = tmp_path / "state" / "spend.json"
    text_of = f'spend_path = "{ledger}"'
    with sim(*FAST_ENGINE, *MODEL) as engine, sim(*CLOUD) as cloud:
        text = budget_policy(engine.url, cloud.url, 0.00002, text_of)
        with proxy(text) as p:
            statuses = [chat(p.url, tenant="acme", model="m").status_code for _ in range(8)]
            assert 503 in statuses
        reached = cloud_received(cloud)
        assert ledger.exists()
        with proxy(text) as p:
            again = chat(p.url, tenant="acme", model="m")
            assert again.status_code == 503
            assert "budget: tenant 'acme' spent" in again.json()["error"]["message"]
            assert chat(p.url, tenant="globex", model="m").status_code == 200
        assert cloud_received(cloud) == reached + 1  # globex's only


def _stream_until_refused(url: str, read_lines: int | None) -> tuple[int, httpx.Response | None]:
    """Cloud streams for acme, each read for `read_lines` lines then closed (None: to its end),
    until one is refused: (streams opened, the refusal)."""
    for opened in range(30):
        with httpx.stream(
            "POST",
            url + "/v1/chat/completions",
            timeout=30,
            headers={"x-overspill-tenant": "acme"},
            json={"model": "m", "stream": True, "messages": [{"role": "user", "content": "hello"}]},
        ) as response:
            if response.status_code != 200:
                response.read()
                return opened, response
            lines = response.iter_lines()
            for _ in range(read_lines) if read_lines is not None else iter(int, 1):
                if next(lines, None) is None:
                    break
    return 30, None


def _spend(url: str) -> tuple[float, dict[str, float]]:
    status = httpx.get(url + "/admin/status").json()
    return status["cloud_spend_usd"], {t["name"]: t["cloud_spent_usd"] for t in status["tenants"]}


LONG_ANSWERS = engine_flags(
    personality="cloud", decode_base_ms=5, output_tokens=400, output_distribution="fixed"
)
BREAKER_OFF = "[breaker]\nconsecutive_failures = 1000\nmin_calls = 1000\n"


def test_streams_cut_midway_are_charged_for_what_passed_until_the_budget_refuses_them() -> None:
    """The provider cuts every stream after six chunks (no usage chunk ever comes): each is
    charged for what passed, far less than a whole 400-token answer, so several fit the budget,
    then acme is refused; the proxy's spend is the sum of its tenants'."""
    with (
        sim(*FAST_ENGINE, *MODEL) as engine,
        sim(*LONG_ANSWERS) as cloud,
        proxy(budget_policy(engine.url, cloud.url, 0.00003) + BREAKER_OFF) as p,
    ):
        httpx.post(cloud.url + "/_sim/faults", json={"drop_after_chunks": 6})
        opened, refused = _stream_until_refused(p.url, None)
        assert refused is not None, "never charged: the budget never ran out"
        assert refused.status_code == 503
        assert "budget: tenant 'acme' spent" in refused.json()["error"]["message"]
        assert opened >= 2  # charged what passed, not a whole answer (that would exceed it)
        total, tenants = _spend(p.url)
        assert tenants["acme"] >= 0.00003
        assert total == pytest.approx(sum(tenants.values()), abs=3e-6)


def test_streams_closed_early_by_the_client_are_charged_until_refused() -> None:
    """A client that closes each cloud stream after three lines, before the usage chunk: the
    first close is charged, and acme is refused once its budget is spent."""
    with (
        sim(*FAST_ENGINE, *MODEL) as engine,
        sim(*LONG_ANSWERS) as cloud,
        proxy(budget_policy(engine.url, cloud.url, 0.00003)) as p,
    ):
        assert _stream_one_and_close(p.url) == 200
        _until(lambda: _spend(p.url)[1]["acme"] > 0)  # the proxy notices the close, charges
        _, refused = _stream_until_refused(p.url, 3)
        assert refused is not None, "the budget never ran out"
        assert refused.status_code == 503
        assert "budget: tenant 'acme' spent" in refused.json()["error"]["message"]


def _stream_one_and_close(url: str) -> int:
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hello"}]}
    headers = {"x-overspill-tenant": "acme"}
    url += "/v1/chat/completions"
    with httpx.stream("POST", url, timeout=30, headers=headers, json=body) as response:
        lines = response.iter_lines()
        for _ in range(3):
            next(lines)
        return response.status_code


def test_local_streams_closed_early_still_use_the_token_rate() -> None:
    """A bucket of 100 tokens (refilling at 0.1 a second: nothing comes back while the test
    runs); each stream asks for up to 50 and is closed after three lines: it is charged what
    passed (prompt and pieces), not nothing, so the tenant is soon refused."""
    tenants = KEYED.replace('name = "acme"', 'name = "acme"\ntokens_per_minute = 6\nburst_s = 1000')
    # 50 ms a token: while a busy machine is slow to notice a close, a few more pieces pass,
    # not dozens (at 5 ms, a stall of 0.2 s let 40 through and the first stream used it all)
    long = (
        *MODEL,
        "--decode-base-ms",
        "50",
        "--output-tokens",
        "400",
        "--output-distribution",
        "fixed",
    )
    with stack(tenants, engine_args=long) as p:
        body = {
            "model": "sim-model",
            "stream": True,
            "max_tokens": 50,
            "messages": [{"role": "user", "content": "hello"}],
        }
        headers = {"authorization": f"Bearer {ACME_KEY}"}
        refused, opened = None, 0
        for _ in range(30):
            with httpx.stream(
                "POST", p.url + "/v1/chat/completions", json=body, headers=headers, timeout=30
            ) as response:
                if response.status_code != 200:
                    response.read()
                    refused = response
                    break
                opened += 1
                lines = response.iter_lines()
                for _ in range(3):
                    next(lines)
            _until(lambda: _in_flight(p.url, "acme") == 0)  # settled: charged what it used
        assert refused is not None, "early closes were never charged"
        assert refused.status_code == 429
        assert refused.headers["x-overspill-limit"] == "tokens_per_minute"
        # charged what passed, not the whole estimate of 59 (then the second would be refused)
        assert opened >= 2


def test_cloud_answers_the_client_gave_up_on_are_charged_until_refused() -> None:
    """The provider holds every answer back; each time, once the call has reached it, the
    client gives up and closes its connection. The proxy charges the request's estimate (the
    provider bills the work it started), and acme is refused once its budget is spent."""
    with (
        sim(*FAST_ENGINE, *MODEL) as engine,
        sim(*LONG_ANSWERS) as cloud,
        proxy(budget_policy(engine.url, cloud.url, 0.0001)) as p,
    ):
        httpx.post(cloud.url + "/_sim/faults", json={"hang_s": 600})
        body = orjson.dumps(
            {"model": "m", "max_tokens": 60, "messages": [{"role": "user", "content": "hi"}]}
        )
        host, port = p.url.removeprefix("http://").split(":")
        request = (
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nx-overspill-tenant: acme"
            b"\r\ncontent-type: application/json\r\ncontent-length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
            + body
        )
        answer, given_up = b"", 0
        while not answer and given_up < 20:
            with socket.create_connection((host, int(port)), timeout=60) as conn:
                conn.sendall(request)
                conn.setblocking(False)
                # either the call reaches the provider (then the client gives up), or the
                # proxy answers at once: refused, the budget spent
                while cloud_received(cloud) <= given_up and not (answer := _peek(conn)):
                    time.sleep(0.05)
                conn.setblocking(True)
                while answer and not answer.endswith(b"}}"):  # the refusal, to its end
                    answer += conn.recv(65536)
            if not answer:
                given_up += 1
                _until(lambda n=given_up: _spend(p.url)[1]["acme"] >= n * 0.00002)
        assert answer.startswith(b"HTTP/1.1 503")
        assert b"budget: tenant 'acme' spent" in answer
        assert given_up >= 2  # each was charged its estimate, about $0.000037


def _peek(conn: socket.socket) -> bytes:
    try:
        return conn.recv(65536)
    except BlockingIOError:
        return b""


def _until(condition: Callable[[], bool]) -> None:
    """Wait for an event the test cannot be told of; the test's timeout is the backstop."""
    while not condition():
        time.sleep(0.05)


# Answers of 20,000 tokens at >= 5 ms a step: 100 s, so one ends early only if it is aborted.
ENDLESS = 20_000


def test_a_cloud_stream_the_client_leaves_is_closed_at_the_provider() -> None:
    with (
        sim(*FAST_ENGINE, *MODEL) as engine,
        sim(*LONG_ANSWERS, "--output-tokens", str(ENDLESS)) as cloud,
        proxy(budget_policy(engine.url, cloud.url, 1.0)) as p,
    ):
        assert _stream_one_and_close(p.url) == 200
        stats = wait_until(lambda: _ended(cloud), "the provider's answer ended")
        assert stats["aborted"] == 1  # not finished: cut short by the proxy
        assert stats["generation_tokens"] < ENDLESS


def _ended(engine: Process) -> dict[str, Any]:
    """The simulator's stats once its one request has ended (aborted or not), else {}."""
    stats: dict[str, Any] = httpx.get(engine.url + "/_sim/stats").json()
    return stats if stats["requests"] == 1 and stats["running"] == 0 else {}


def _in_flight(url: str, tenant: str) -> int:
    tenants = httpx.get(url + "/admin/status", timeout=30).json()["tenants"]
    return int(next(t["in_flight"] for t in tenants if t["name"] == tenant))


# --- cloud budgets under concurrency -------------------------------------------------------

# gpt-4o-mini in litellm's tables, USD a token; a prompt of a few words estimates under 50.
PROMPT_USD, ANSWER_USD = 0.15e-6, 0.6e-6


def test_concurrent_cloud_calls_reserve_their_worst_case_and_stay_within_the_budget() -> None:
    """Eight of acme's requests at once, each of at most 400 answer tokens (~$0.00024), while the
    provider holds every answer: a call reserves the most it may cost before it leaves, so with
    a budget of $0.0006 two go and the six that do not fit beside them are refused at once,
    unsent. Their clients then give up (each charged its worst case): the spend ends within the
    budget plus one call's worst case (before, all eight went: eight worst cases). Once settled,
    the reservations are given back: the next call goes."""
    budget, worst = 0.0006, 50 * PROMPT_USD + 400 * ANSWER_USD  # above each call's worst case
    with (
        sim(*FAST_ENGINE, *MODEL) as engine,
        sim(*LONG_ANSWERS) as cloud,
        proxy(budget_policy(engine.url, cloud.url, budget)) as p,
    ):
        httpx.post(cloud.url + "/_sim/faults", json={"hang_s": 600})
        refused = asyncio.run(_eight_at_once_then_give_up(p.url, cloud.url))
        reached = cloud_received(cloud)
        assert (reached, len(refused)) == (2, 6)
        for answer in refused:
            assert answer.status_code == 503
            message = answer.json()["error"]["message"]
            assert "budget: tenant 'acme' spent" in message
            assert "2 cloud calls in flight" in message
        _until(lambda: _spend(p.url)[1]["acme"] >= reached * 400 * ANSWER_USD)  # both settled
        assert _spend(p.url)[1]["acme"] <= budget + worst
        httpx.post(cloud.url + "/_sim/faults", json={"hang_s": 0})
        assert chat(p.url, tenant="acme", model="m", max_tokens=20).status_code == 200
        assert cloud_received(cloud) == reached + 1


async def _eight_at_once_then_give_up(url: str, cloud: str) -> list[httpx.Response]:
    """acme's eight requests, sent at once; once each is held at the provider or answered by the
    proxy, the held ones give up (their connections closed). The proxy's answers."""
    headers = {"x-overspill-tenant": "acme"}
    async with httpx.AsyncClient(timeout=60) as client:
        sent = [
            asyncio.create_task(
                client.post(
                    url + "/v1/chat/completions",
                    headers=headers,
                    json={
                        "model": "m",
                        "max_tokens": 400,
                        "messages": [{"role": "user", "content": f"question {n}"}],
                    },
                )
            )
            for n in range(8)
        ]

        async def accounted() -> bool:
            held = len((await client.get(cloud + "/_sim/requests")).json()["requests"])
            return held + sum(task.done() for task in sent) == len(sent)

        await eventually(accounted, "each request held at the provider or answered")
        answered = [task.result() for task in sent if task.done()]
        for task in sent:
            task.cancel()
        await asyncio.gather(*sent, return_exceptions=True)
    return answered


# --- speculation and the token rate ---------------------------------------------------------


def test_speculated_hits_use_the_token_rate_for_the_engine_work_they_withdrew() -> None:
    """A bucket of 100 tokens (refilling at 0.1 a second: nothing comes back while the test
    runs). The engine hangs, so each paraphrase's verified hit wins the race against the
    engine's request started beside it (speculation), which is withdrawn having been sent: its
    prompt was prefilled, and that is charged, as for a stream closed early, so acme is soon
    refused (before, such a hit cost nothing and acme never was)."""
    tenants = KEYED.replace('name = "acme"', 'name = "acme"\ntokens_per_minute = 6\nburst_s = 1000')
    book = "What is a good book on machine learning?"
    with (
        sim(*FAST_ENGINE, *MODEL) as engine,
        proxy(config(engine.url, tenants, cache=True), env={"GLOBEX_KEY": GLOBEX_KEY}) as p,
    ):
        first = chat(p.url, ACME_KEY, max_tokens=4, temperature=0, messages=_asking(book))
        assert first.status_code == 200
        wait_until(lambda: _searchable(p.url), "the question embedded, the verifier loaded")
        httpx.post(engine.url + "/_sim/faults", json={"hang_s": 600}).raise_for_status()
        paraphrase = _asking("whats a good book on machine learning")
        statuses = []
        for _ in range(20):
            answer = chat(p.url, ACME_KEY, max_tokens=4, temperature=0, messages=paraphrase)
            statuses.append(answer.status_code)
            if answer.status_code != 200:
                break
            assert answer.headers["x-overspill-cache"] == "hit-semantic"
            _until(lambda: _in_flight(p.url, "acme") == 0)  # settled: charged what it used
        assert statuses[-1] == 429, "speculated hits never used the token rate"
        assert answer.headers["x-overspill-limit"] == "tokens_per_minute"
        assert len(statuses) >= 3  # the prompt's prefill, not the whole estimate, each time
        cache = httpx.get(p.url + "/admin/status").json()["cache"]
        assert cache["withdrawn"] == len(statuses) - 1


def _asking(question: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": question}]


def _searchable(url: str) -> bool:
    cache = httpx.get(url + "/admin/status").json()["cache"]
    return bool(cache["searchable"] >= 1 and cache["verifier_ready"])
