"""Overflow to the cloud, privacy that never leaks, fallback along the chain: real processes
(the proxy, vLLM-like simulators, cloud simulators that record what reached them)."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.processes import TEST_CLOUD_KEY, Process, overspill_command, proxy, running, sim
from tests.waits import eventually, held, in_flight, route_of, status, wait_until

SLOW_LOCAL = ("--max-seqs", "1", "--decode-base-ms", "20", "--prefill-ms-per-token", "0.01")
CLOUD = ("--personality", "cloud", "--network-latency-ms", "20", "--decode-base-ms", "2")


@dataclass
class Stack:
    proxy: Process
    local: Process
    clouds: list[Process]

    def cloud_bodies(self) -> list[str]:
        """Everything every cloud received, as text: what left the building."""
        return [
            json.dumps(entry["body"])
            for cloud in self.clouds
            for entry in httpx.get(cloud.url + "/_sim/requests").json()["requests"]
        ]

    def clear(self) -> None:
        for cloud in self.clouds:
            httpx.delete(cloud.url + "/_sim/requests")


def policy(local: str, clouds: list[str], extra: str = "") -> str:
    cloud_tables = "".join(
        f'[[clouds]]\nname = "cloud-{i}"\nmodel = "openai/gpt-4o-mini"\napi_base = "{url}/v1"\n'
        'api_key_env = "TEST_CLOUD_KEY"\n'
        for i, url in enumerate(clouds)
    )
    chain = ", ".join(f'"cloud-{i}"' for i in range(len(clouds)))
    return f"""
[server]
probe_interval_s = 0.2
[retry]
attempts = 2
initial_backoff_s = 0.05
[[backends]]
name = "local"
kind = "vllm"
url = "{local}"
models = ["m"]
max_concurrency = 1
{cloud_tables}
[[routes]]
model = "m"
cloud = [{chain}]
[routes.overflow]
max_inflight_ratio = 1.0
[privacy]
default = "public"
levels = [{{name = "public", cloud = "any"}}, {{name = "internal", cloud = ["cloud-1"]}},
          {{name = "restricted", cloud = "none"}}]
[privacy.detectors]
email = "restricted"
payment_card = "restricted"
[[tenants]]
name = "hr"
privacy = "restricted"
{extra}
"""


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    with (
        sim("--model", "m", *SLOW_LOCAL) as local,
        sim(*CLOUD) as c0,
        sim(*CLOUD) as c1,
        proxy(policy(local.url, [c0.url, c1.url]), "--log-level", "warning") as p,
    ):
        yield Stack(p, local, [c0, c1])


@pytest.fixture(autouse=True)
def fresh(stack: Stack) -> Iterator[None]:
    stack.clear()
    yield
    for process in (stack.local, *stack.clouds):
        httpx.delete(process.url + "/_sim/faults")
    # a held stream is closed by its test; the next one starts with the local engine free
    wait_until(lambda: in_flight(stack.proxy.url, "local") == 0, "the local engine is free")


async def burst(
    url: str, bodies: list[dict[str, Any]], headers: dict[str, str] | None = None
) -> list[httpx.Response]:
    async with httpx.AsyncClient(base_url=url, timeout=60, headers=headers) as client:
        return await asyncio.gather(*(client.post("/v1/chat/completions", json=b) for b in bodies))


def chat(content: str, **extra: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [{"role": "user", "content": content}],
        "max_tokens": 30,
        **extra,
    }


def holding(content: str = "hold the only sequence") -> dict[str, Any]:
    """A stream that takes the local engine's one sequence for as long as a test holds it
    (2,000 tokens at 20 ms: 40 s; closed long before): the local engine is saturated by
    construction, not because a burst happened to arrive faster than it drains."""
    return chat(content, stream=True, max_tokens=2000)


async def test_excess_over_local_capacity_overflows_to_the_cloud(stack: Stack) -> None:
    with held(stack.proxy.url, holding()) as first:
        assert route_of(first) == "local/local"
        responses = await burst(stack.proxy.url, [chat(f"question {i}") for i in range(5)])
    assert all(r.status_code == 200 for r in responses), [r.text for r in responses]
    assert [route_of(r) for r in responses] == ["cloud/cloud-0"] * 5  # local takes one at a time
    for overflowed in responses:
        assert overflowed.headers["x-overspill-reason"].startswith("overflow")
        assert overflowed.json()["choices"][0]["message"]["content"]
    assert len(stack.cloud_bodies()) == 5


async def test_streamed_overflow_arrives_as_openai_chunks(stack: Stack) -> None:
    api = openai.AsyncOpenAI(base_url=stack.proxy.url + "/v1", api_key="x", max_retries=0)
    with held(stack.proxy.url, holding()):
        stream = await api.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "stream me"}],
            max_tokens=8,
            stream=True,
        )
        chunks = [c async for c in stream]
    await api.close()
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) == 8
    assert ["stream me" in body for body in stack.cloud_bodies()] == [True]  # the cloud answered


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        (chat("secret plan", metadata={"privacy": "restricted"}), {}),
        (chat("secret plan"), {"X-Overspill-Privacy": "restricted"}),
        (chat("secret plan"), {"X-Overspill-Tenant": "hr"}),
        (chat("write to jane.doe@exemplo.com about the plan"), {}),
        (chat("my card is 4539 1488 0343 6467, charge it"), {}),
        (
            chat("my card is 4539 1488 0343 6467", metadata={"privacy": "public"}),
            {"X-Overspill-Privacy": "public"},
        ),
    ],
    ids=["metadata", "header", "tenant", "email", "card", "card-declared-public"],
)
async def test_restricted_requests_never_reach_the_cloud_even_when_local_is_saturated(
    stack: Stack, body: dict[str, Any], headers: dict[str, str]
) -> None:
    """The local engine is held; the restricted requests wait in the proxy for it (they may
    not overflow) while public ones sent meanwhile overflow; then it is freed."""
    url = stack.proxy.url
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:

        def post(sent: dict[str, Any], extra: dict[str, str]) -> Awaitable[httpx.Response]:
            return client.post("/v1/chat/completions", json=sent, headers=extra)

        with held(url, holding()):
            restricted = [asyncio.create_task(post(body, headers)) for _ in range(3)]
            await eventually(lambda: waiting_async(client, 3), "the restricted requests queued")
            fillers = await asyncio.gather(*(post(chat(f"filler {i}"), {}) for i in range(3)))
        results = await asyncio.gather(*restricted)
    assert [route_of(r) for r in fillers] == ["cloud/cloud-0"] * 3  # it was saturated
    for response in results:
        assert response.status_code == 200, response.text
        assert response.headers["x-overspill-route"] == "local/local"
        assert response.headers["x-overspill-privacy"] == "restricted"
    leaked = [
        text
        for text in stack.cloud_bodies()
        if "secret" in text or "4111" in text or "jane" in text
    ]
    assert leaked == []


async def waiting_async(client: httpx.AsyncClient, count: int) -> bool:
    """`count` requests wait in the proxy's waiting room for model m."""
    routes = (await client.get("/admin/status")).json()["routes"]
    return next(r["waiting"] for r in routes if r["model"] == "m") == count


async def test_internal_requests_only_reach_the_named_cloud(stack: Stack) -> None:
    with held(stack.proxy.url, holding()):
        internal = [chat(f"internal {i}", metadata={"privacy": "internal"}) for i in range(5)]
        responses = await burst(stack.proxy.url, internal)
    assert [route_of(r) for r in responses] == ["cloud/cloud-1"] * 5  # never cloud-0
    first_cloud = httpx.get(stack.clouds[0].url + "/_sim/requests").json()["requests"]
    assert not any("internal" in json.dumps(entry["body"]) for entry in first_cloud)


def test_unknown_privacy_level_is_a_400(stack: Stack) -> None:
    response = httpx.post(
        stack.proxy.url + "/v1/chat/completions",
        json=chat("x"),
        headers={"X-Overspill-Privacy": "top-secret"},
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "unknown_privacy_level"


async def test_a_cloud_429_storm_falls_back_along_the_chain(stack: Stack) -> None:
    httpx.post(
        stack.clouds[0].url + "/_sim/faults", json={"rate_limit_rate": 1.0, "retry_after_s": 0}
    )
    with held(stack.proxy.url, holding()):
        responses = await burst(stack.proxy.url, [chat(f"storm {i}") for i in range(5)])
    assert all(r.status_code == 200 for r in responses), [r.text for r in responses]
    assert [route_of(r) for r in responses] == ["cloud/cloud-1"] * 5


def test_restricted_with_the_local_engine_down_is_refused_naming_the_rule() -> None:
    with (
        sim("--model", "m", *SLOW_LOCAL) as local,
        sim(*CLOUD) as cloud,
        proxy(policy(local.url, [cloud.url, cloud.url])) as p,
    ):
        # down for longer than the test lasts (the simulator is stopped with it)
        httpx.post(local.url + "/_sim/faults", json={"listener_down_s": 600})
        wait_until(lambda: not status(p.url)["backends"][0]["healthy"], "the probe noticed")
        headers = {"X-Overspill-Tenant": "hr"}
        url = p.url + "/v1/chat/completions"
        restricted = httpx.post(url, json=chat("hr file"), headers=headers, timeout=30)
        public = httpx.post(url, json=chat("weather"), timeout=30)
        log = httpx.get(cloud.url + "/_sim/requests").json()
    assert restricted.status_code == 503
    message = restricted.json()["error"]["message"]
    assert "privacy=restricted" in message
    assert "cloud cloud-0 not allowed" in message
    assert public.status_code == 200
    assert public.headers["x-overspill-route"] == "cloud/cloud-0"
    assert [e["body"]["messages"][0]["content"] for e in log["requests"]] == ["weather"]


def cloud_cost(stack: Stack) -> float:
    text = httpx.get(stack.proxy.url + "/metrics").text
    match = re.search(r"^overspill_cloud_cost_usd_total (\S+)$", text, re.MULTILINE)
    assert match is not None
    return float(match.group(1))


async def test_cloud_spend_is_priced_from_litellms_tables(stack: Stack) -> None:
    """gpt-4o-mini at $0.15 / $0.60 per million prompt / completion tokens."""
    before = cloud_cost(stack)
    with held(stack.proxy.url, holding()):  # every one of them goes to the cloud
        responses = await burst(stack.proxy.url, [chat(f"priced {i}") for i in range(6)])
    # either cloud (the 429 storm above may have left cloud-0's breaker open): the same prices
    assert all(route_of(r).startswith("cloud/") for r in responses)
    expected = sum(
        r.json()["usage"]["prompt_tokens"] * 0.15e-6
        + r.json()["usage"]["completion_tokens"] * 0.6e-6
        for r in responses
    )
    assert expected > 0
    assert cloud_cost(stack) - before == pytest.approx(expected, rel=1e-6)


def test_restricted_requests_stay_local_while_the_policy_is_reloaded(tmp_path: Path) -> None:
    """Saturating traffic, restricted requests and a stream of valid policy edits at once."""
    with sim("--model", "m", *SLOW_LOCAL) as local, sim(*CLOUD) as c0, sim(*CLOUD) as c1:
        text = policy(local.url, [c0.url, c1.url])
        path = tmp_path / "overspill.toml"
        path.write_text(text)
        command = overspill_command("serve", "--config", str(path), "--port", "0")
        with running(command, env={"TEST_CLOUD_KEY": TEST_CLOUD_KEY}) as p:
            stop = threading.Event()

            def edit() -> None:
                i = 0
                while not stop.is_set():
                    # alternate the cloud chain's order: a real change, reloaded each time
                    swapped = text.replace(
                        'cloud = ["cloud-0", "cloud-1"]', 'cloud = ["cloud-1", "cloud-0"]'
                    )
                    path.write_text(swapped if i % 2 else text)
                    i += 1
                    time.sleep(0.1)

            def reloaded() -> int:
                return int(httpx.get(p.url + "/admin/status").json()["policy"]["reloads"]["ok"])

            editor = threading.Thread(target=edit)
            editor.start()
            responses: list[httpx.Response] = []
            # bursts go on until the watcher has reloaded at least three times while they ran
            # (how many bursts that takes depends on the machine; the test's timeout bounds it)
            while not responses or reloaded() < 3:
                # short answers: the restricted ones queue for the one local sequence
                bodies = [chat(f"filler {i}", max_tokens=8) for i in range(10)]
                secret = [
                    chat(f"secret {i} for jane.doe@exemplo.com", max_tokens=8) for i in range(10)
                ]
                pairs = [b for pair in zip(bodies, secret, strict=True) for b in pair]
                responses += asyncio.run(burst(p.url, pairs))
            stop.set()
            editor.join()
            reloads = httpx.get(p.url + "/admin/status").json()["policy"]["reloads"]
        logs = [httpx.get(c.url + "/_sim/requests").json()["requests"] for c in (c0, c1)]
    assert all(r.status_code == 200 for r in responses), [
        r.text for r in responses if r.status_code != 200
    ]
    assert reloads["ok"] >= 3
    assert any(entry for log in logs for entry in log)  # the fillers did overflow
    leaked = [e for log in logs for e in log if "secret" in json.dumps(e["body"])]
    assert leaked == []
