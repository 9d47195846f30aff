"""The labelled privacy corpus through the real proxy (bench/data/privacy_corpus.jsonl, every
request shape: chat, parts, tool calls and results, `user`, metadata, schemas, predictions,
completions with suffixes, embeddings, images): the proxy keeps from the cloud exactly what the
detectors find, and sends the rest on, whatever field or endpoint it sits in. Local engine
down, every detector (the names model's too) mapped to a level that may not leave; the cloud
simulator's log is the proof. What the detectors find on the corpus, class by class, is
bench/privacy.py's to score; this test shows the proxy reads each request as the bench does."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from bench.privacy import detected
from bench.privacy_corpus import Case, load
from proxy.legs.ner import Ner
from tests.policy_texts import EVERY_DETECTOR_RESTRICTED
from tests.processes import Process, backend_toml, cloud_toml, engine_flags, proxy, sim

POLICY = (
    """
[[routes]]
model = "m"
cloud = ["mini"]

[privacy]
levels = [{ name = "public" }, { name = "restricted", cloud = "none" }]
media = "restricted"
"""
    + EVERY_DETECTOR_RESTRICTED
    + 'person = "restricted"\nmedical = "restricted"\n'
)

PER_KIND = 5
ENDPOINT = {"completions": "/v1/completions", "completions_suffix": "/v1/completions"}
ENDPOINT |= {"embeddings": "/v1/embeddings"}


@contextlib.contextmanager
def cloud_only_proxy() -> Iterator[tuple[Process, Process]]:
    """A proxy under POLICY whose local engine is down, and the cloud simulator behind it."""
    with contextlib.ExitStack() as stack:
        flags = engine_flags(
            personality="cloud", output_tokens=2, decode_base_ms=1, network_latency_ms=0
        )
        cloud = stack.enter_context(sim(*flags))
        down = backend_toml("gone", "vllm", "http://127.0.0.1:9", {"m": "m"})
        text = down + cloud_toml("mini", cloud.url) + POLICY
        yield stack.enter_context(proxy(text)), cloud


@pytest.fixture(scope="module")
def leaving() -> Iterator[tuple[Process, Process]]:
    with cloud_only_proxy() as pair:
        yield pair


@pytest.fixture(scope="module")
def names() -> Ner:
    return Ner()


def kept(names: Ner, case: Case) -> bool:
    """Whether the policy keeps the request local: a detector fired, or it carries media."""
    body = case.body
    found = detected(names, body)
    return bool(found) or case.shape == "image"


def sampled(cases: list[Case], per_kind: int = PER_KIND) -> list[Case]:
    """The first few clean cases and the first few with personal data of each request shape:
    every shape goes through the proxy both ways (the whole corpus is the bench's to judge,
    bench/privacy.py; the names models make each request cost a tenth of a second or more)."""
    taken: dict[tuple[str, bool], int] = {}
    out = []
    for case in cases:
        kind = (case.shape, bool(case.labels))
        if taken.get(kind, 0) < per_kind:
            taken[kind] = taken.get(kind, 0) + 1
            out.append(case)
    return out


def received(log: httpx.Client) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = log.get("/_sim/requests").json()["requests"]
    return got


# the names models read every request twice (here, and in the proxy): minutes when both cores
# are busy, where the suite's default allows two
@pytest.mark.timeout(360)
def test_the_proxy_keeps_back_exactly_what_the_detectors_find(
    leaving: tuple[Process, Process], names: Ner
) -> None:
    p, cloud = leaving
    cases = sampled(load())
    shapes = {case.shape for case in cases}
    assert len(shapes) == 15  # every request shape of the corpus goes through
    wrong: list[str] = []
    client = httpx.Client(base_url=p.url, timeout=60)
    log = httpx.Client(base_url=cloud.url, timeout=60)  # the cloud simulator's request log
    with client, log:
        for case in cases:
            log.delete("/_sim/requests")
            path = ENDPOINT.get(case.shape, "/v1/chat/completions")
            answer = client.post(path, json={"model": "m", **case.body})
            left = len(received(log))
            expected = (503, 0) if kept(names, case) else (200, 1)
            if (answer.status_code, left) != expected:
                wrong.append(f"{case.id}: {answer.status_code}, {left} sent ({answer.text[:120]})")
    assert wrong == []
