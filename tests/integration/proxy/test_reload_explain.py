"""Hot reload under traffic (file change, SIGHUP, POST /admin/reload) and explain."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.processes import (
    FAST_ENGINE,
    ROOT,
    Process,
    backend_toml,
    overspill_command,
    running,
    sim,
)
from tests.waits import wait_until

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


def policy_text(a: str, b: str, local: str) -> str:
    backends = backend_toml("a", "vllm", a, {"m": "m"}) + backend_toml("b", "vllm", b, {"m": "m"})
    return (
        "[server]\nprobe_interval_s = 0.2\n"
        + backends
        + f"""
[[routes]]
model = "m"
local = ["{local}"]
"""
    )


@dataclass
class Traffic:
    """Requests sent one after another in a thread: (time sent, status, route)."""

    url: str
    results: list[tuple[float, int, str]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as client:
            while not self.stop.is_set():
                sent = time.monotonic()
                response = client.post("/v1/chat/completions", json=BODY)
                route = response.headers.get("x-overspill-route", "")
                self.results.append((sent, response.status_code, route))


@dataclass
class Stack:
    proxy: Process
    a: Process
    b: Process
    path: Path

    def write(self, text: str) -> None:
        self.path.write_text(text)

    def status(self) -> dict[str, object]:
        result: dict[str, object] = httpx.get(self.proxy.url + "/admin/status").json()
        return result


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    path = tmp_path / "overspill.toml"
    with sim("--model", "m", *FAST_ENGINE) as a, sim("--model", "m", *FAST_ENGINE) as b:
        path.write_text(policy_text(a.url, b.url, "a"))
        command = overspill_command("serve", "--config", str(path), "--port", "0")
        with running(command) as p:
            yield Stack(p, a, b, path)


@contextlib.contextmanager
def traffic(url: str) -> Iterator[Traffic]:
    load = Traffic(url)
    thread = threading.Thread(target=load.run)
    thread.start()
    try:
        yield load
    finally:
        load.stop.set()
        thread.join(timeout=30)


def test_a_valid_edit_takes_effect_with_no_failed_request(stack: Stack) -> None:
    """Traffic flows to `a`; the file is edited to route to `b`: once the watcher has reloaded
    it, every request goes to `b`, and none failed on the way. (How soon the watcher notices is
    its poll interval on this machine's clock: not asserted here.)"""
    with traffic(stack.proxy.url) as load:
        wait_until(lambda: len(load.results) >= 3, "traffic before the edit")
        stack.write(policy_text(stack.a.url, stack.b.url, "b"))
        wait_until(
            lambda: any(route == "local/b" for _, _, route in load.results), "the edit took effect"
        )
        first_b = min(sent for sent, _, route in load.results if route == "local/b")
        wait_until(
            lambda: sum(sent > first_b for sent, _, _ in load.results) >= 3,
            "traffic after the edit",
        )
    assert load.results[0][2] == "local/a"
    assert all(status == 200 for _, status, _ in load.results)
    assert all(route == "local/b" for sent, _, route in load.results if sent > first_b)
    last = stack.status()["policy"]["last_reload"]  # type: ignore[index]
    assert last["ok"] is True
    assert last["trigger"] == "file change"


INVALID_EDITS = [
    "[server\nport = 1",
    "[[backends]]\nname = 'a'\nkind = 'tgi'\nurl = 'http://x:1'",
    "[[backends]]\nname = 'a'\nkind = 'vllm'\nurl = 'ftp://x'",
    "[routes]\nmodel = 3",
    "[privacy]\ndefault = 'nobody'\n[[backends]]\nname='a'\nkind='vllm'\nurl='http://x:1'",
    "bogus = true\n[[backends]]\nname='a'\nkind='vllm'\nurl='http://x:1'",
    "[[backends]]\nname='a'\nkind='vllm'\nurl='http://x:1'\n[[routes]]\nmodel='m'\nlocal=['zz']",
    "[timeouts]\nidle_s = -1\n[[backends]]\nname='a'\nkind='vllm'\nurl='http://x:1'",
    "[retry]\njitter = 'yes'\n[[backends]]\nname='a'\nkind='vllm'\nurl='http://x:1'",
    "[breaker]\nfailure_rate = 2\n[[backends]]\nname='a'\nkind='vllm'\nurl='http://x:1'",
]


def test_fifty_invalid_edits_during_traffic_change_nothing(stack: Stack) -> None:
    with traffic(stack.proxy.url) as load:
        for i in range(50):
            stack.write(INVALID_EDITS[i % len(INVALID_EDITS)])
            answer = httpx.post(stack.proxy.url + "/admin/reload")
            assert answer.status_code == 422
            problems = answer.json()["problems"]
            assert problems
            assert all(str(stack.path) in problem for problem in problems)
            # a request answered between each edit and the next: traffic and edits interleave
            # by construction, however fast either goes
            answered = len(load.results)
            wait_until(lambda n=answered: len(load.results) > n, "a request between edits")
        stack.write(policy_text(stack.a.url, stack.b.url, "a"))
    assert len(load.results) > 50
    assert all(status == 200 for _, status, _ in load.results)
    assert {route for _, _, route in load.results} == {"local/a"}
    reloads = stack.status()["policy"]["reloads"]  # type: ignore[index]
    assert reloads["rejected"] >= 50
    metrics = httpx.get(stack.proxy.url + "/metrics").text
    rejected = re.search(
        r'^overspill_policy_reloads_total\{result="rejected"\} (\S+)$', metrics, re.M
    )
    assert rejected is not None
    assert float(rejected.group(1)) >= 50


def test_sighup_reloads(stack: Stack) -> None:
    assert stack.status()["policy"]["last_reload"] is None  # type: ignore[index]  # and it is up
    stack.proxy.popen.send_signal(signal.SIGHUP)

    def reloaded() -> dict[str, object] | None:
        last: dict[str, object] | None = stack.status()["policy"]["last_reload"]  # type: ignore[index]
        return last if last and last["trigger"] == "SIGHUP" else None

    assert wait_until(reloaded, "SIGHUP reloaded the policy")["ok"] is True


def test_admin_explain_uses_live_state(stack: Stack) -> None:
    httpx.post(stack.a.url + "/_sim/faults", json={"listener_down_s": 600})  # past the test
    wait_until(lambda: not stack.status()["backends"][0]["healthy"], "the probe noticed")  # type: ignore[index]
    result = httpx.post(stack.proxy.url + "/admin/explain", json=BODY).json()
    assert result["targets"] == []
    assert result["refused"] is True
    assert any(reason.startswith("unhealthy: a") for reason in result["reasons"])


def test_explain_command_line(tmp_path: Path) -> None:
    policy = tmp_path / "p.toml"
    text = (
        policy_text("http://127.0.0.1:1", "http://127.0.0.1:2", "a")
        + '[[clouds]]\nname = "c"\nmodel = "openai/gpt-4o-mini"\n'
        + '[privacy]\nlevels = [{name = "public"}, {name = "restricted", cloud = "none"}]\n'
        + '[privacy.detectors]\nemail = "restricted"\n'
    )
    policy.write_text(text.replace('local = ["a"]', 'local = ["a"]\ncloud = ["c"]'))
    request = tmp_path / "r.json"
    request.write_text(
        json.dumps({"model": "m", "messages": [{"role": "user", "content": "to a@b.org"}]})
    )
    out = subprocess.run(
        overspill_command("explain", str(policy), "--request", str(request)),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=True,
    ).stdout
    result = json.loads(out)
    because = ["detected email in messages[0].content: restricted"]  # where, never the value
    assert result["privacy"] == {"level": "restricted", "because": because}
    assert result["targets"] == ["local/a"]
    assert "privacy=restricted: cloud c not allowed" in result["reasons"]
