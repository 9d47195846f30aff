"""A harness for unit tests of the request path: the real Pipeline (under the real ASGI
response, PipelineResponse) with scripted engine and cloud legs and a fake clock; no socket, no
process."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from policies.loader import parse_policy
from policies.model import CloudTarget, Policy, Timeouts
from proxy.errors import UpstreamError, UpstreamNotConnected, UpstreamStatus
from proxy.flow.caching import Answers
from proxy.flow.pipeline import Pipeline
from proxy.flow.record import Record, record_of
from proxy.flow.runtime import Runtime
from proxy.http.handlers import PipelineResponse
from proxy.legs.answer import Answer
from proxy.legs.backends import Backends
from proxy.legs.cloud import Cloud
from proxy.legs.cloud_answer import CloudAnswer
from proxy.legs.cloud_params import Unlisted
from proxy.schema import ProxyRequest, parse_request
from tests.fakes import FakeClock

Step = UpstreamError | bytes  # an error to raise, or a whole JSON answer
PRICE_USD = 0.01  # what each scripted cloud answer costs


def chat_answer(text: str) -> bytes:
    return orjson.dumps(
        {
            "id": "c1",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        }
    )


@dataclass
class Whole:
    """A non-streamed answer."""

    body: bytes
    stream: bool = False
    status: int = 200

    def headers(self) -> list[tuple[bytes, bytes]]:
        return [(b"content-type", b"application/json")]

    async def read(self) -> bytes:
        return self.body

    async def chunks(self) -> AsyncIterator[bytes]:
        yield self.body

    def close(self) -> None:
        pass


@dataclass
class Engines:
    """The local engines' client, scripted per backend: each call takes that backend's next
    step (the last one repeats). Records every call."""

    script: dict[str, list[Step]]
    timeouts: Timeouts = field(default_factory=Timeouts)
    calls: list[str] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    held: asyncio.Event | None = None  # when given, answers wait until it is set
    arrived: asyncio.Event = field(default_factory=asyncio.Event)  # set at every call

    async def open(
        self, backend: str, url: str, body: bytes, headers: Mapping[str, str], stream: bool
    ) -> Answer:
        steps = self.script[backend]
        step = steps[min(self.calls.count(backend), len(steps) - 1)]
        self.calls.append(backend)
        self.bodies.append(orjson.loads(body))
        self.arrived.set()
        if self.held is not None:
            await self.held.wait()
        if isinstance(step, UpstreamError):
            raise step
        return Whole(step)

    async def get(self, url: str, limit_s: float) -> tuple[int, bytes]:
        raise AssertionError("no probes in unit tests")

    async def close(self) -> None:
        pass


class ScriptedCloud(Cloud):
    """The cloud leg without litellm: answers every call, and records what it was sent. With
    `echo`, the answer repeats the last message it received (to see placeholders come back)."""

    def __init__(self, echo: bool = False) -> None:
        super().__init__()
        self.received: list[dict[str, Any]] = []
        self.echo = echo

    async def open(
        self,
        target: CloudTarget,
        request: ProxyRequest,
        request_id: str,
        charge: Callable[[float], None] = lambda usd: None,
        unlisted: Unlisted = "drop",
        send_user: bool = False,
    ) -> CloudAnswer:
        self.received.append(request.body)
        charge(PRICE_USD)
        said = request.body["messages"][-1]["content"] if self.echo else f"from {target.name}"
        return CloudAnswer(target.name, False, chat_answer(said))


POLICY = """
[retry]
attempts = 3
initial_backoff_s = 0.1
jitter = false

[[backends]]
name = "a"
kind = "vllm"
url = "http://a.invalid"
models = { m = "m" }

[[backends]]
name = "b"
kind = "vllm"
url = "http://b.invalid"
models = { m = "m" }

[[clouds]]
name = "mini"
model = "openai/gpt-4o-mini"
wire = "litellm"  # the scripted cloud below stands in for litellm

[[routes]]
model = "m"
cloud = ["mini"]

[privacy]
levels = [{ name = "public" }, { name = "restricted", cloud = "none" }]
"""


@dataclass
class Harness:
    policy: Policy
    engines: Engines
    cloud: ScriptedCloud
    clock: FakeClock
    pipeline: Pipeline

    async def send(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> Sent:
        headers = headers or {}
        identity = self.pipeline.identify(headers)  # as the endpoint does, before the body
        request = parse_request("chat", orjson.dumps(body))
        sent = Sent()
        respond = PipelineResponse(self.pipeline, request, "req-1", headers, identity)
        state: dict[str, Any] = {}
        await respond({"type": "http", "state": state}, _never_leaves, sent.send)
        sent.record = record_of(state)
        return sent


async def _never_leaves() -> dict[str, Any]:
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


@dataclass
class Sent:
    messages: list[dict[str, Any]] = field(default_factory=list)
    record: Record = field(default_factory=lambda: Record(""))  # what the access log will read

    async def send(self, message: Any) -> None:
        self.messages.append(message)

    @property
    def status(self) -> int:
        return int(self.messages[0]["status"])

    @property
    def headers(self) -> dict[str, str]:
        return {k.decode(): v.decode() for k, v in self.messages[0]["headers"]}

    @property
    def json(self) -> dict[str, Any]:
        body = b"".join(m.get("body", b"") for m in self.messages[1:])
        result: dict[str, Any] = orjson.loads(body)
        return result


def harness(
    script: dict[str, list[Step]], policy_text: str = POLICY, answers: Answers | None = None
) -> Harness:
    """`answers`: the cache and flights (a cache with fake models, say); else one without."""
    policy = parse_policy(policy_text, "unit.toml", {})
    engines = Engines(script)
    backends = Backends(policy.backends, engines, 1.0)
    for monitor in backends.monitors.values():  # as a first probe would find them: idle
        monitor.healthy, monitor.error, monitor.running, monitor.waiting = True, None, 0, 0
    clock, cloud = FakeClock(), ScriptedCloud()
    runtime = Runtime(backends, engines, cloud, clock=clock.clock, answers=answers or Answers())
    return Harness(policy, engines, cloud, clock, Pipeline(policy, runtime))


def ask(text: str = "hello") -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": text}]}


def refused() -> UpstreamError:
    return UpstreamNotConnected("connection refused")


def status(code: int) -> UpstreamError:
    return UpstreamStatus("engine", code, b'{"error": {"message": "engine says no"}}', {})
