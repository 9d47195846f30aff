"""Clearing a request for a cloud (proxy/flow/legs.py, proxy/legs/ner.py) off the event loop:
the rules on the names model's spans and the medical terms' scan run in the model's thread,
even for a request of single words; a long request's texts are normalised and its redaction
made in a worker thread; everything the entity detectors read counts toward their limit; a
request is redacted once whatever the cloud targets it tries, live and in explain. Which thread
did the work is read from inside it; nothing is timed."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from typing import Any

import orjson
import pytest

from policies.payload import payload_of
from proxy.errors import UpstreamUnavailable
from proxy.flow import legs as flow_legs
from proxy.legs import ner as ner_module
from proxy.legs.ner import Ner
from proxy.schema import parse_request
from tests.unit.proxy.pipeline_harness import POLICY, ScriptedCloud, ask, harness, refused


class Listed(Ner):
    """A names model that knows one name (nothing to load)."""

    def _load(self) -> None:
        pass

    def people(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        name = "Ada Byron"
        return [[(t.index(name), t.index(name) + len(name))] if name in t else [] for t in texts]

    def tagged(
        self, texts: Sequence[str], thorough: bool = False, deadline: float = math.inf
    ) -> list[list[tuple[int, int]]]:
        if not thorough:  # sure of none; leaning toward the English model's one name
            return [[] for _ in texts]
        return self.people(texts)


def spied(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[str]:
    """Replaces module.name by a wrapper noting the thread each call runs in."""
    threads: list[str] = []
    real: Callable[..., Any] = getattr(module, name)

    def noting(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, noting)
    return threads


async def test_the_rules_run_in_the_models_thread_even_for_single_words(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    threads = spied(monkeypatch, ner_module, "found")
    names = Listed()
    try:
        for text in ("hi", "Ring Ada Byron"):  # nothing for the model to read; a sentence
            payload = payload_of({"messages": [{"role": "user", "content": text}]})
            await names.screen(payload, ["person", "medical"], 5)
    finally:
        names.close()
    assert len(threads) == 2
    assert all(thread.startswith("overspill-ner") for thread in threads)


async def test_single_words_past_the_limit_count_as_medical_data() -> None:
    """Doses in single words are read for terms too: 170,000 characters of them are past the
    limit, and count as found rather than be read on the loop."""
    words = [f"{i}mg" for i in range(30_000)]
    payload = payload_of({"messages": [{"role": "user", "content": "hi"}], "tags": words})
    names = Listed()
    try:
        result = await names.screen(payload, ["person", "medical"], 5)
    finally:
        names.close()
    assert result.fired == ["person", "medical"]
    assert "beyond the names model's limit" in result.reason("medical")


REDACTING = (
    POLICY.replace(
        'levels = [{ name = "public" }, { name = "restricted", cloud = "none" }]',
        'levels = [{ name = "public" }, { name = "personal", redact = true }]',
    )
    + '\n[privacy.detectors]\nperson = "personal"\nemail = "personal"\n'
)
TWO_CLOUDS = REDACTING.replace('cloud = ["mini"]', 'cloud = ["mini", "maxi"]').replace(
    "[[routes]]",
    '[[clouds]]\nname = "maxi"\nmodel = "openai/gpt-4o"\nwire = "litellm"\n\n[[routes]]',
)


class FirstFails(ScriptedCloud):
    """The first cloud target cannot be reached; the second answers."""

    async def open(self, target: Any, *args: Any, **kwargs: Any) -> Any:
        if target.name == "mini":
            raise UpstreamUnavailable("mini: connection reset")
        return await super().open(target, *args, **kwargs)


def to_the_cloud(policy: str, cloud: ScriptedCloud | None = None) -> Any:
    h = harness({"a": [refused()], "b": [refused()]}, policy)
    h.pipeline.runtime.ner = Listed()
    if cloud is not None:
        h.pipeline.runtime.cloud = h.cloud = cloud
    for monitor in h.pipeline.runtime.backends.monitors.values():  # only the cloud is left
        monitor.healthy, monitor.error = False, "probe failed"
    return h


async def test_a_long_request_is_normalised_and_redacted_in_a_worker_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    normalised = spied(monkeypatch, flow_legs, "payload_of")
    redacted = spied(monkeypatch, flow_legs, "redacted_body")
    h = to_the_cloud(REDACTING)
    text = "Ring Ada Byron (ada@exemplo.com) about the invoice. " + "Nothing else. " * 100
    sent = await h.send(ask(text))  # 1.5 KB: past CLEAR_INLINE_BYTES
    assert sent.status == 200
    assert h.cloud.received[0]["messages"][0]["content"].startswith(
        "Ring <PERSON_1> (<EMAIL_1>) about"
    )
    here = threading.current_thread().name  # the event loop's
    assert normalised
    assert redacted
    assert here not in normalised + redacted


async def test_a_short_request_is_cleared_on_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread hop costs more than clearing a body this short."""
    redacted = spied(monkeypatch, flow_legs, "redacted_body")
    h = to_the_cloud(REDACTING)
    sent = await h.send(ask("mail ada@exemplo.com"))
    assert sent.status == 200
    assert redacted == [threading.current_thread().name]


async def test_a_request_is_redacted_once_for_every_cloud_it_tries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    redacted = spied(monkeypatch, flow_legs, "redacted_body")
    h = to_the_cloud(TWO_CLOUDS, FirstFails())
    sent = await h.send(ask("Tell Ada Byron (ada@exemplo.com) that it is done"))
    assert sent.status == 200
    assert sent.headers["x-overspill-route"] == "cloud/maxi"
    assert h.cloud.received[0]["messages"][0]["content"] == (
        "Tell <PERSON_1> (<EMAIL_1>) that it is done"
    )
    assert len(redacted) == 1


async def test_explain_redacts_once_for_every_cloud_it_would_try(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    redacted = spied(monkeypatch, flow_legs, "redacted_body")
    h = to_the_cloud(TWO_CLOUDS)
    request = parse_request("chat", orjson.dumps(ask("Tell Ada Byron that it is done")))
    privacy, plan = await h.pipeline.explain(request, {})
    assert privacy.level == "personal"
    assert [target.name for target in plan.targets][-2:] == ["mini", "maxi"]
    assert len(redacted) == 1
    assert h.cloud.received == []


class Broken(Listed):
    def people(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        raise RuntimeError("model broke")


@pytest.mark.parametrize(
    ("names", "text", "why"),
    [
        (Broken(), "Ring Ada Byron about it", "person: the names model failed"),
        (Listed(), "Ring Ada Byron about it. " + "word " * 20_000, "names model's limit"),
    ],
)
async def test_what_the_names_model_did_not_read_may_not_leave_redacted(
    names: Ner, text: str, why: str
) -> None:
    """Its names are not known, so they would leave as they are: counted as found, it is
    refused where it could only leave redacted (not sent without the names redacted)."""
    h = to_the_cloud(REDACTING)
    h.pipeline.runtime.ner = names
    sent = await h.send(ask(text))
    assert sent.status == 503
    assert "leaves only redacted" in sent.json["error"]["message"]
    assert why in sent.json["error"]["message"]
    assert h.cloud.received == []
