"""`overspill serve --demo`: three simulators behind the proxy, stopped with it."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import httpx
import openai

from tests.processes import overspill_command, running


def children_of(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True)
    return [int(line) for line in out.stdout.split()]


def test_demo_serves_and_stops_its_engines() -> None:
    with running(overspill_command("serve", "--demo", "--port", "0")) as p:
        api = openai.OpenAI(base_url=p.url + "/v1", api_key="x", max_retries=0)
        reply = api.chat.completions.create(
            model="llama-3.1-8b", messages=[{"role": "user", "content": "Hello"}], max_tokens=5
        )
        assert reply.choices[0].message.content
        status = httpx.get(p.url + "/admin/status").json()
        assert [(b["name"], b["kind"], b["healthy"]) for b in status["backends"]] == [
            ("vllm-a", "vllm", True),
            ("vllm-b", "vllm", True),
            ("ollama-1", "ollama", True),
        ]
        engines = children_of(p.popen.pid)
        assert len(engines) == 3
        p.popen.send_signal(signal.SIGTERM)
        p.popen.wait(timeout=10)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_alive(pid) for pid in engines):
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in engines)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
