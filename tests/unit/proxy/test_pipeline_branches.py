"""More branches of the request path, on the harness of tests/unit/proxy/pipeline_harness.py: the
answer cache and in-flight sharing, the door (keys, allowed models, rate limits), what is logged,
and degrade to a smaller model. No socket, no process, a fake clock."""

from __future__ import annotations

import asyncio
import hashlib
import threading

import orjson
import pytest

from policies.pii import DETECTORS
from proxy.errors import Forbidden, Unauthorized
from proxy.flow.caller import OFFLOAD_SCAN_BYTES
from proxy.schema import parse_request
from tests.fakes import until
from tests.unit.proxy.pipeline_harness import POLICY, ask, chat_answer, harness, refused, status
from tests.waits import DEADLINE_S

CACHED = POLICY + "\n[cache]\nenabled = true\nsemantic = false\n"
DETECTED = '\n[privacy.detectors]\nemail = "restricted"\n'
NO_PROXY_QUEUE = '[priorities]\nclasses = [{ name = "interactive", max_wait_s = 0 }]\n'


def exact(text: str = "hello") -> dict[str, object]:
    return {**ask(text), "temperature": 0}


async def test_a_repeated_deterministic_request_is_answered_from_the_cache() -> None:
    h = harness({"a": [chat_answer("first")], "b": [chat_answer("first")]}, CACHED)
    first = await h.send(exact())
    await h.pipeline.runtime.answers.settle()  # stored off the hot path
    again = await h.send(exact())
    assert (first.headers["x-overspill-cache"], again.headers["x-overspill-cache"]) == (
        "miss",
        "hit-exact",
    )
    assert again.headers["x-overspill-route"] == "cache"
    assert again.json["choices"][0]["message"]["content"] == "first"
    assert len(h.engines.calls) == 1
    assert (again.record.route, again.record.tokens_in) == ("cache", None)  # nothing computed


async def test_a_sampled_request_is_not_cached() -> None:
    h = harness({"a": [chat_answer("x")], "b": [chat_answer("x")]}, CACHED)
    for _ in range(2):
        sent = await h.send({**ask(), "temperature": 0.7})
        await h.pipeline.runtime.answers.settle()
        assert sent.headers["x-overspill-cache"] == "bypass"
    assert len(h.engines.calls) == 2


@pytest.mark.parametrize(("directive", "kept"), [("no-store", "first"), ("no-cache", "second")])
async def test_cache_control_from_the_client(directive: str, kept: str) -> None:
    """Neither directive takes a stored answer; no-cache still stores the fresh one, no-store
    does not: a third, plain request shows which answer the cache holds."""
    script = [chat_answer("first"), chat_answer("second")]
    h = harness({"a": script, "b": script}, CACHED)
    h.pipeline.runtime.backends.monitors["b"].waiting = 1  # always a: its answers in order
    await h.send(exact())
    await h.pipeline.runtime.answers.settle()
    sent = await h.send(exact(), {"cache-control": directive})
    await h.pipeline.runtime.answers.settle()
    assert sent.json["choices"][0]["message"]["content"] == "second"
    plain = await h.send(exact())
    assert plain.headers["x-overspill-route"] == "cache"
    assert plain.json["choices"][0]["message"]["content"] == kept
    assert h.engines.calls == ["a", "a"]


async def test_an_error_answer_is_never_stored() -> None:
    h = harness({"a": [status(400), chat_answer("ok")], "b": [chat_answer("ok")]}, CACHED)
    h.pipeline.runtime.backends.monitors["b"].waiting = 1  # always a: its answers in order
    failed = await h.send(exact())
    await h.pipeline.runtime.answers.settle()
    assert failed.status == 400
    answered = await h.send(exact())
    assert answered.status == 200
    assert answered.headers["x-overspill-cache"] == "miss"  # the 400 was not kept


async def test_identical_requests_in_flight_share_one_upstream_call() -> None:
    h = harness({"a": [chat_answer("shared")], "b": [chat_answer("shared")]}, CACHED)
    h.engines.held = asyncio.Event()
    first = asyncio.create_task(h.send(exact()))
    second = asyncio.create_task(h.send(exact()))
    coalescer = h.pipeline.runtime.answers.coalescer
    await until(lambda: coalescer.joined == 1, "the second request boards the first's flight")
    h.engines.held.set()
    answers = await asyncio.gather(first, second)
    assert [a.json["choices"][0]["message"]["content"] for a in answers] == ["shared"] * 2
    assert len(h.engines.calls) == 1


async def test_a_degraded_answer_is_never_stored_as_the_answer_asked_for() -> None:
    text = CACHED.replace(
        'cloud = ["mini"]',
        'cloud = ["mini"]\noverflow = { max_waiting = 2 }\n[routes.degrade]\nmax_tokens = 16',
    ).replace(
        "[cache]", '[priorities]\nclasses = [{ name = "interactive", max_wait_s = 0 }]\n[cache]'
    )
    h = harness({"a": [chat_answer("short")], "b": [chat_answer("short")]}, text)
    for monitor in h.pipeline.runtime.backends.monitors.values():
        monitor.waiting = 5
    restricted = {"x-overspill-privacy": "restricted"}
    for _ in range(2):
        sent = await h.send({**exact(), "max_tokens": 500}, restricted)
        await h.pipeline.runtime.answers.settle()
        assert sent.headers["x-overspill-degraded"] == "max_tokens 500 -> 16"
    assert len(h.engines.calls) == 2
    assert len(h.pipeline.runtime.answers.cache) == 0


SMALLER = """
[[backends]]
name = "big"
kind = "vllm"
url = "http://big.invalid"
models = { m = "m" }

[[backends]]
name = "small"
kind = "vllm"
url = "http://small.invalid"
models = { m-small = "m-small" }

[[routes]]
model = "m"
overflow = { max_waiting = 2 }

[routes.degrade]
model = "m-small"

[[routes]]
model = "m-small"
overflow = { max_waiting = 2 }

[priorities]
classes = [{ name = "interactive", max_wait_s = 0 }]
"""


async def test_under_pressure_a_smaller_model_with_room_answers_and_says_so() -> None:
    h = harness({"big": [chat_answer("big")], "small": [chat_answer("small")]}, SMALLER)
    h.pipeline.runtime.backends.monitors["big"].waiting = 5
    sent = await h.send(ask())
    assert sent.status == 200
    assert sent.headers["x-overspill-route"] == "local/small"
    assert sent.headers["x-overspill-degraded"].startswith("model m -> m-small")
    assert h.engines.bodies[0]["model"] == "m-small"


async def test_with_no_room_for_the_smaller_model_either_nothing_is_degraded() -> None:
    h = harness({"big": [chat_answer("big")], "small": [chat_answer("small")]}, SMALLER)
    for monitor in h.pipeline.runtime.backends.monitors.values():
        monitor.waiting = 5
    sent = await h.send(ask())
    assert h.engines.calls == ["big"]  # queued at the engine (no proxy queue for this class)
    assert "x-overspill-degraded" not in sent.headers


def key_digest(key: str) -> str:
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


DOOR = (
    POLICY
    + """
[[tenants]]
name = "hr"
api_keys = ["{hr}"]
requests_per_minute = 1
burst_s = 60.0
models = ["m"]

[[tenants]]
name = "lab"
api_keys = ["{lab}"]
models = ["other"]
""".format(hr=key_digest("sk-hr-unit-key"), lab=key_digest("sk-lab-unit-key"))
)


REQUIRED = "\n[auth]\nrequire_keys = true\n"


def bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


def test_a_tenant_with_keys_is_not_taken_on_its_name_alone() -> None:
    """Refused from the headers, before the body is read."""
    h = harness({"a": [chat_answer("x")], "b": [chat_answer("x")]}, DOOR)
    with pytest.raises(Unauthorized):
        h.pipeline.identify({**bearer("sk-nobody"), "x-overspill-tenant": "hr"})
    assert h.pipeline.runtime.gate.refused["api_key"] == 1


def test_where_keys_are_required_an_unknown_key_is_refused() -> None:
    h = harness({"a": [chat_answer("x")], "b": [chat_answer("x")]}, DOOR + REQUIRED)
    with pytest.raises(Unauthorized):
        h.pipeline.identify(bearer("sk-nobody"))
    assert h.pipeline.identify(bearer("sk-hr-unit-key")).tenant == "hr"


def test_a_key_naming_another_tenant_is_forbidden() -> None:
    h = harness({"a": [chat_answer("x")], "b": [chat_answer("x")]}, DOOR)
    with pytest.raises(Forbidden):
        h.pipeline.identify({**bearer("sk-hr-unit-key"), "x-overspill-tenant": "lab"})


async def test_a_model_the_tenant_may_not_use_is_a_403_and_reaches_no_engine() -> None:
    h = harness({"a": [chat_answer("x")], "b": [chat_answer("x")]}, DOOR)
    sent = await h.send(ask(), bearer("sk-lab-unit-key"))
    assert sent.status == 403
    assert sent.json["error"]["code"] == "model_not_allowed"
    assert h.engines.calls == []


async def test_past_its_rate_the_tenant_gets_a_429_with_retry_after() -> None:
    h = harness({"a": [chat_answer("x")], "b": [chat_answer("x")]}, DOOR)
    h.pipeline.runtime.gate.clock = lambda: 100.0  # no refill between the two
    assert (await h.send(ask(), bearer("sk-hr-unit-key"))).status == 200
    limited = await h.send(ask(), bearer("sk-hr-unit-key"))
    assert limited.status == 429
    assert int(limited.headers["retry-after"]) >= 1
    assert len(h.engines.calls) == 1


async def test_prompts_are_in_the_record_only_when_the_policy_logs_them() -> None:
    quiet = harness({"a": [chat_answer("x")], "b": [chat_answer("x")]})
    told = harness(
        {"a": [chat_answer("x")], "b": [chat_answer("x")]},
        "[server]\nlog_prompts = true\n" + POLICY,
    )
    assert (await quiet.send(ask("what is my plan?"))).record.prompt is None
    assert (await told.send(ask("what is my plan?"))).record.prompt == "what is my plan?"


@pytest.mark.parametrize(
    ("headers", "code"),
    [
        ({"x-overspill-priority": "urgentest"}, "unknown_priority"),
        ({"x-overspill-privacy": "secret-ish"}, "unknown_privacy_level"),
    ],
)
async def test_a_class_or_level_the_policy_does_not_define_is_a_400(
    headers: dict[str, str], code: str
) -> None:
    h = harness({"a": [chat_answer("x")], "b": [chat_answer("x")]})
    sent = await h.send(ask(), headers)
    assert sent.status == 400
    assert sent.json["error"]["code"] == code
    assert h.engines.calls == []


async def test_a_long_body_is_scanned_off_the_event_loop_and_still_kept_local() -> None:
    h = harness({"a": [refused()], "b": [refused()]}, POLICY + DETECTED)
    text = "word " * (OFFLOAD_SCAN_BYTES // 5) + " mail me at jane.doe@exemplo.com"
    sent = await h.send(ask(text))
    assert h.pipeline.runtime.scans.started == 1
    assert sent.record.privacy == "restricted"
    assert h.cloud.received == []  # the engines are down, and the cloud may not have it


async def test_a_privacy_refusal_is_final_and_says_so_to_the_sdks() -> None:
    """The OpenAI SDKs retry a 503 unless x-should-retry says false: the level will not change."""
    h = harness({"a": [chat_answer("x")], "b": [chat_answer("x")]})
    for monitor in h.pipeline.runtime.backends.monitors.values():
        monitor.healthy, monitor.error = False, "probe failed"
    kept = await h.send(ask(), {"x-overspill-privacy": "restricted"})
    assert kept.status == 503
    assert kept.headers["x-should-retry"] == "false"
    assert "cloud mini not allowed" in kept.json["error"]["message"]
    assert h.cloud.received == []


async def test_a_refusal_with_no_privacy_in_it_leaves_retrying_to_the_client() -> None:
    h = harness(
        {"a": [chat_answer("x")], "b": [chat_answer("x")]}, POLICY.replace('cloud = ["mini"]\n', "")
    )
    for monitor in h.pipeline.runtime.backends.monitors.values():
        monitor.healthy, monitor.error = False, "probe failed"
    down = await h.send(ask())
    assert down.status == 503
    assert "x-should-retry" not in down.headers


async def test_the_answer_says_what_set_the_level_and_where_never_the_value() -> None:
    h = harness({"a": [chat_answer("x")], "b": [chat_answer("x")]}, POLICY + DETECTED)
    body = {**ask("hello"), "metadata": {"contact\r\nX-Injected: 1": "jane.doe@exemplo.com"}}
    sent = await h.send(body)
    because = sent.headers["x-overspill-privacy-because"]
    assert because == "detected email in metadata.contact??X-Injected: 1: restricted"
    assert "x-injected" not in sent.headers  # the key's line break did not make a header
    assert sent.record.privacy_because == (
        "detected email in metadata.contact\r\nX-Injected: 1: restricted",
    )
    assert not any("jane" in header for header in sent.headers.values())


async def test_a_scan_past_its_deadline_counts_as_a_detection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The detector is held until the request is answered, so its scan cannot end in time
    whatever the machine: the request is kept from the cloud as if it had fired."""
    release = threading.Event()

    def held(text: str) -> bool:
        release.wait(DEADLINE_S)
        return False

    monkeypatch.setitem(DETECTORS, "email", held)
    text = POLICY.replace("[privacy]", "[privacy]\nscan_timeout_s = 0.05") + DETECTED
    h = harness({"a": [refused()], "b": [refused()]}, text)
    for monitor in h.pipeline.runtime.backends.monitors.values():  # only the cloud is left
        monitor.healthy, monitor.error = False, "probe failed"
    try:
        sent = await h.send(ask("word " * (OFFLOAD_SCAN_BYTES // 5)))
    finally:
        release.set()
    assert sent.status == 503
    assert sent.record.privacy == "restricted"
    assert sent.record.privacy_because == ("email: not scanned in time: restricted",)
    assert h.pipeline.runtime.scans.timed_out == 1
    assert h.cloud.received == []


REDACTED = (
    POLICY.replace(
        'levels = [{ name = "public" }, { name = "restricted", cloud = "none" }]',
        'levels = [{ name = "public" }, { name = "personal", redact = true },'
        ' { name = "restricted", cloud = "none" }]',
    )
    + '\n[privacy.detectors]\nemail = "personal"\nphone = "personal"\n'
)


async def test_a_redacting_level_sends_placeholders_and_the_client_reads_the_values() -> None:
    h = harness({"a": [refused()], "b": [refused()]}, REDACTED)
    h.cloud.echo = True
    for monitor in h.pipeline.runtime.backends.monitors.values():  # only the cloud is left
        monitor.healthy, monitor.error = False, "probe failed"
    text = "Mail jane@exemplo.com or call +44 20 7946 0958; jane@exemplo.com again"
    sent = await h.send(ask(text))
    assert sent.status == 200
    assert sent.headers["x-overspill-route"] == "cloud/mini"
    assert sent.headers["x-overspill-redacted"] == "2"  # two values, one of them twice
    left = h.cloud.received[0]["messages"][0]["content"]
    assert left == "Mail <EMAIL_1> or call <PHONE_1>; <EMAIL_1> again"
    assert sent.json["choices"][0]["message"]["content"] == text
    _, plan = await h.pipeline.explain(parse_request("chat", orjson.dumps(ask(text))), {})
    assert "privacy=personal: cloud mini only redacted" in plan.reasons  # explain says so


async def test_what_cannot_all_be_redacted_does_not_leave() -> None:
    h = harness({"a": [refused()], "b": [refused()]}, REDACTED)
    for monitor in h.pipeline.runtime.backends.monitors.values():
        monitor.healthy, monitor.error = False, "probe failed"
    body = {**ask("hello"), "metadata": {"jane@exemplo.com": "a key that names her"}}
    sent = await h.send(body)
    assert sent.status == 503
    why = "privacy=personal leaves only redacted: personal data in a field name"
    assert f"mini may not take it ({why})" in sent.json["error"]["message"]
    assert h.cloud.received == []
