"""The first run: `overspill serve --demo` as a user starts it, and `overspill demo traffic`
against it, as real processes on free ports.

A test learns about the demo only from outside: the configuration whose path it prints (the
simulators' URLs, the capacities), the answers' headers, the cloud simulator's record of what
reached it, and /proc for the processes it started. No test asserts on elapsed time: each waits
for what it can observe, with generous deadlines.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import shutil
import signal
import subprocess
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from policies.loader import load_policy
from policies.model import Policy
from proxy.demo.config import CLOUD, PUBLIC_MODEL, TENANTS
from proxy.demo.mix import KINDS, plan
from proxy.demo.tally import Outcome, Tally, decision_of, final_table, percentile
from tests.processes import (
    ROOT,
    Process,
    alive,
    child_pids,
    demo,
    demo_config_path,
    overspill_command,
)
from tests.waits import status, wait_until

SUPPORT = {"x-overspill-tenant": "support"}
RESEARCH_KEY = next(t.key for t in TENANTS if t.key)
RESEARCH = {"authorization": f"Bearer {RESEARCH_KEY}"}


@dataclass
class Demo:
    proxy: Process
    config: Path
    policy: Policy

    @property
    def url(self) -> str:
        return self.proxy.url

    @property
    def cloud_url(self) -> str:
        return (self.policy.cloud(CLOUD).api_base or "").removesuffix("/v1")

    @property
    def local_slots(self) -> int:
        """Requests the local engines take at once, as the demo's configuration says."""
        return sum(backend.max_concurrency or 0 for backend in self.policy.backends)

    def cloud_bodies(self) -> list[str]:
        """Everything that reached the cloud, as text: what left the building."""
        log = httpx.get(self.cloud_url + "/_sim/requests").json()
        return [json.dumps(entry["body"]) for entry in log["requests"]]

    def chat(
        self, content: str, headers: dict[str, str] | None = None, **extra: Any
    ) -> httpx.Response:
        return httpx.post(
            self.url + "/v1/chat/completions",
            json=body(content, **extra),
            headers=headers or SUPPORT,
            timeout=60,
        )


def body(content: str, **extra: Any) -> dict[str, Any]:
    return {
        "model": PUBLIC_MODEL,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": 16,
        **extra,
    }


def started(process: Process) -> Demo:
    path = demo_config_path(process)
    return Demo(process, path, load_policy(path))


@pytest.fixture(scope="module")
def running_demo() -> Iterator[Demo]:
    with demo() as process:
        yield started(process)


@pytest.fixture
def the_demo(running_demo: Demo) -> Demo:
    httpx.delete(running_demo.cloud_url + "/_sim/requests")
    return running_demo


async def burst(url: str, bodies: list[dict[str, Any]]) -> list[httpx.Response]:
    async with httpx.AsyncClient(base_url=url, timeout=120, headers=SUPPORT) as client:
        return await asyncio.gather(*(client.post("/v1/chat/completions", json=b) for b in bodies))


# ---- the configuration it writes ----------------------------------------------------------


def test_the_demo_configuration_validates_and_shows_the_product(the_demo: Demo) -> None:
    checked = subprocess.run(
        overspill_command("check", str(the_demo.config)),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stderr
    assert "OK" in checked.stdout
    policy = the_demo.policy
    route = policy.route(PUBLIC_MODEL)
    assert route is not None
    assert route.cloud == (CLOUD,)
    assert route.cache is not None
    assert route.cache.unset_temperature
    email = policy.privacy.level(policy.privacy.detectors["email"])
    assert email.cloud == "none"
    assert any(t.limits.requests_per_minute for t in policy.tenants)
    text = the_demo.config.read_text()
    comments = " ".join(text.replace("#", " ").split())
    assert "with an earlier sample" in comments  # the cache's trade-off, where it is switched on


# ---- what the demo shows ------------------------------------------------------------------


async def test_a_burst_above_the_local_capacity_overflows_to_the_cloud(the_demo: Demo) -> None:
    # Three times what the engines take at once, each long enough to still run when the last
    # arrives, and sampled (never from the cache).
    run = uuid.uuid4().hex[:8]
    bodies = [
        body(f"burst {run} {i}", temperature=1.0, max_tokens=100)
        for i in range(3 * the_demo.local_slots)
    ]
    replies = await burst(the_demo.url, bodies)
    assert all(r.status_code == 200 for r in replies), [r.text for r in replies]
    routes = Counter(r.headers["x-overspill-route"].split("/")[0] for r in replies)
    assert routes["local"] >= 1, routes
    assert routes["cloud"] >= 1, routes
    overflowed = [r for r in replies if r.headers["x-overspill-route"] == f"cloud/{CLOUD}"]
    assert overflowed[0].headers["x-overspill-reason"].startswith("overflow")
    reached = [text for text in the_demo.cloud_bodies() if run in text]
    assert len(reached) == routes["cloud"]


def test_a_repeated_question_without_temperature_comes_from_the_cache(the_demo: Demo) -> None:
    question = f"What are your opening hours ({uuid.uuid4().hex[:8]})?"
    first = the_demo.chat(question)
    assert first.status_code == 200
    assert first.headers["x-overspill-cache"] == "miss"  # looked up: no temperature is cacheable
    again = the_demo.chat(question)
    assert again.headers["x-overspill-cache"] == "hit-exact"
    assert again.headers["x-overspill-route"] == "cache"
    assert again.json()["choices"] == first.json()["choices"]


async def test_personal_data_stays_local_while_the_engines_are_full(the_demo: Demo) -> None:
    run = uuid.uuid4().hex[:8]
    filler = [
        body(f"filler {run} {i}", temperature=1.0, max_tokens=100)
        for i in range(2 * the_demo.local_slots)
    ]
    personal = [
        body(f"Write to jane.{run}@exemplo.com about order {i}", temperature=1.0) for i in range(3)
    ]
    personal.append(body(f"Call Jane ({run}) back on +1 415 555 0199", temperature=1.0))
    replies = await burst(the_demo.url, filler + personal)
    assert any(r.headers["x-overspill-route"].startswith("cloud/") for r in replies[: len(filler)])
    for reply in replies[len(filler) :]:
        assert reply.status_code == 200, reply.text
        assert reply.headers["x-overspill-route"].startswith("local/")
        assert reply.headers["x-overspill-privacy"] == "restricted"
    reached = "".join(the_demo.cloud_bodies())
    assert f"filler {run}" in reached
    assert f"jane.{run}" not in reached
    assert f"Jane ({run})" not in reached


async def test_the_rate_limited_tenant_gets_429_past_its_limit(the_demo: Demo) -> None:
    research = next(t for t in the_demo.policy.tenants if t.limits.requests_per_minute)
    limits = research.limits
    assert limits.requests_per_minute is not None
    bucket = int(limits.requests_per_minute * limits.burst_s / 60)
    async with httpx.AsyncClient(base_url=the_demo.url, timeout=60, headers=RESEARCH) as client:
        replies = await asyncio.gather(
            *(
                client.post("/v1/chat/completions", json=body("What is recall?"))
                for _ in range(3 * bucket)
            )
        )
    refused = [r for r in replies if r.status_code == 429]
    assert refused, Counter(r.status_code for r in replies)
    assert refused[0].headers["x-overspill-limit"] == "requests_per_minute"
    assert int(refused[0].headers["retry-after"]) >= 1
    assert the_demo.chat("Is anyone else slowed down?").status_code == 200  # support is not


# ---- `overspill demo traffic` ---------------------------------------------------------------


def traffic(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = overspill_command("demo", "traffic", "--url", url, *args)
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)


def summary_row(output: str, label: str) -> dict[str, int]:
    header = next(line for line in output.splitlines() if line.split()[:1] == ["requests"])
    row = next(line for line in output.splitlines() if line.startswith(label + " "))
    return dict(zip(header.split(), map(int, row[len(label) :].split()), strict=True))


def test_the_traffic_command_sends_the_mix_and_summarises_it(the_demo: Demo) -> None:
    # The same mix twice: the second run asks again what the first one asked.
    first = traffic(the_demo.url, "--seconds", "2", "--rps", "10", "--seed", "7")
    assert first.returncode == 0, first.stderr
    again = traffic(the_demo.url, "--seconds", "2", "--rps", "10", "--seed", "7")
    assert again.returncode == 0, again.stderr
    assert "Traceback" not in again.stderr
    assert re.search(r"^\s+1 s\s+local\s+\d+", again.stdout, re.MULTILINE)  # the live line
    everything = summary_row(again.stdout, "all")
    assert everything["requests"] == 20
    assert everything["local"] > 0
    assert everything["cache"] > 0
    assert summary_row(again.stdout, "personal data")["cloud"] == 0
    assert "TTFT (streams)" in again.stdout


def answered_so_far(live_line: str) -> int:
    """The requests answered so far, read from a live line ("  3 s  local   12  cache    4 ...")."""
    if not re.match(r"^\s+\d+ s\s+local", live_line):
        return 0
    decided = live_line.split("in flight")[0].split()[2:]
    return sum(int(count) for count in decided[1::2])


def test_ctrl_c_stops_the_traffic_command_with_the_summary_so_far(the_demo: Demo) -> None:
    command = overspill_command("demo", "traffic", "--url", the_demo.url, "--seconds", "600")
    with subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        assert process.stdout is not None
        lines = iter(process.stdout.readline, "")
        assert any(answered_so_far(line) > 0 for line in lines)  # answers have come back
        process.send_signal(signal.SIGINT)
        output, errors = process.communicate(timeout=60)
    assert process.returncode == 0
    assert "Traceback" not in errors
    assert "interrupted" in output
    assert summary_row(output, "all")["requests"] > 0


def test_the_traffic_command_says_when_there_is_no_proxy() -> None:
    result = traffic("http://127.0.0.1:9", "--seconds", "1")
    assert result.returncode == 1
    assert "cannot reach the proxy at http://127.0.0.1:9" in result.stderr
    assert "Traceback" not in result.stderr


# ---- the local engines gone, and stopping -------------------------------------------------


def sims(pid: int) -> dict[int, str]:
    """The demo's simulators: pid -> personality."""
    found = {}
    for child in child_pids(pid):
        command = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        if b"sim" in command and b"--personality" in command:
            found[child] = command[command.index(b"--personality") + 1].decode()
    return found


def test_with_the_local_engines_killed_the_cloud_answers_and_personal_data_is_refused() -> None:
    with demo() as process:
        the_demo = started(process)
        locals_ = [pid for pid, kind in sims(process.popen.pid).items() if kind != "cloud"]
        assert len(locals_) == len(the_demo.policy.backends)
        for pid in locals_:
            os.kill(pid, signal.SIGKILL)
        wait_until(
            lambda: not any(b["healthy"] for b in status(the_demo.url)["backends"]),
            "the proxy sees every local engine down",
        )
        public = the_demo.chat("Which payment methods do you accept?")
        private = the_demo.chat("Forward this to jane.doe@exemplo.com please")
        reached = the_demo.cloud_bodies()
    assert public.status_code == 200, public.text
    assert public.headers["x-overspill-route"] == f"cloud/{CLOUD}"
    assert any("payment methods" in text for text in reached)
    assert private.status_code == 503
    message = private.json()["error"]["message"]
    assert "privacy=restricted" in message
    assert f"cloud {CLOUD} not allowed" in message
    assert not any("jane.doe" in text for text in reached)


@pytest.mark.parametrize(
    "stop", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["ctrl-c", "sigterm", "sigkill"]
)
def test_stopping_the_demo_leaves_no_process_behind(stop: signal.Signals) -> None:
    with demo() as process:
        children = sims(process.popen.pid)
        assert sorted(children.values()) == ["cloud", "ollama", "vllm", "vllm"]
        config = demo_config_path(process)
        process.popen.send_signal(stop)
        code = process.popen.wait(timeout=60)
        assert process.closed.wait(timeout=60)  # all of its output read
    output = "".join(process.output)
    if stop == signal.SIGKILL:
        assert code == -signal.SIGKILL  # no say in it: its children go by PR_SET_PDEATHSIG
    else:
        assert code in (0, 130), output
        assert "Traceback" not in output
        assert not config.exists()  # the temporary configuration is removed
    shutil.rmtree(config.parent, ignore_errors=True)  # what a killed demo could not
    wait_until(lambda: not any(alive(pid) for pid in children), "every simulator has exited")


# ---- the pure parts: the mix and the summary ----------------------------------------------


def test_the_mix_has_every_kind_both_tenants_and_both_deliveries() -> None:
    planned = [plan(random.Random(seed)) for seed in range(400)]
    assert {p.kind for p in planned} == set(KINDS)
    assert {p.tenant for p in planned} == {t.name for t in TENANTS}
    assert {p.stream for p in planned} == {True, False}
    for p in planned:
        cacheable = p.kind in ("popular question", "paraphrase")
        assert ("temperature" in p.body) is not cacheable, p
    personal = [p.body["messages"][-1]["content"] for p in planned if p.kind == "personal data"]
    assert any("@exemplo.com" in text for text in personal)
    assert any("+1 415 555" in text for text in personal)


def test_the_same_seed_gives_the_same_mix() -> None:
    first, second = random.Random(3), random.Random(3)
    assert [plan(first) for _ in range(50)] == [plan(second) for _ in range(50)]


@pytest.mark.parametrize(
    ("status", "route", "broken", "decision"),
    [
        (200, "local/vllm-a", False, "local"),
        (200, "cloud/openai-mini", False, "cloud"),
        (200, "cache", False, "cache"),
        (429, "none", False, "refused"),
        (503, None, False, "refused"),
        (502, "local/vllm-a", False, "error"),
        (200, "local/vllm-a", True, "error"),
        (0, None, False, "error"),
    ],
)
def test_a_decision_is_what_the_proxy_said(
    status: int, route: str | None, broken: bool, decision: str
) -> None:
    assert decision_of(status, route, broken) == decision


def test_the_summary_counts_and_percentiles() -> None:
    assert percentile([], 50) is None
    assert percentile([0.3, 0.1, 0.2], 50) == 0.2
    assert percentile([float(i) for i in range(1, 101)], 99) == 99.0
    tally = Tally()
    for outcome in [
        Outcome("paraphrase", "support", "cache", True, 0.002),
        Outcome("personal data", "support", "local", False, 0.05),
        Outcome("new, sampled", "support", "local", True, 0.03),
        Outcome("new, sampled", "research", "refused", True, 0.001),
    ]:
        tally.add(outcome)
    line = tally.live_line(3.0, in_flight=2)
    assert "local    2" in line
    assert "in flight   2" in line
    assert "TTFT p50 2 ms, p99 30 ms" in line  # streams answered: not the refusal, nor the whole
    assert tally.recent == []  # each line shows the last second's times
    assert tally.seconds("local", stream=False) == [0.05]
    table = final_table(tally, KINDS, ["support", "research"])
    assert summary_row(table, "all") == {
        "requests": 4,
        "local": 2,
        "cloud": 0,
        "cache": 1,
        "refused": 1,
        "error": 0,
    }
    assert summary_row(table, "tenant research")["refused"] == 1
    local = next(line for line in table.splitlines() if line.startswith("local "))
    assert local.split() == ["local", "30", "ms", "30", "ms", "50", "ms", "50", "ms"]
