"""Requests nobody here wrote, through the real proxy: rows drawn from the report splits of the
outside sets (../shared/data/outside, wrapped in request shapes) and of the generated set
(bench/data/generated_pii, faker's locales), to every endpoint the proxy serves. Local engine
down, every detector mapped to a level that may not leave: the cloud simulator's log shows that
what leaves is exactly what the detectors, run in this process as bench/privacy_outside.py runs
them, let go, and nothing they flag. How much they flag is the bench's to report."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from bench.privacy import detected
from bench.privacy_sets import Row, available, rows
from proxy.legs.ner import Ner
from tests.integration.proxy.test_privacy_corpus import cloud_only_proxy, received
from tests.processes import Process

SETS = ("presidio-synth", "meddocan", "uner", "klue-ner", "stockmark-ner-ja", "generated_pii")
PER_SET = 12
# The endpoints the proxy serves today (the Responses API's rows wait for it)
PATHS = {
    "chat": "/v1/chat/completions",
    "completions": "/v1/completions",
    "embeddings": "/v1/embeddings",
}


@pytest.fixture(scope="module")
def leaving() -> Iterator[tuple[Process, Process]]:
    with cloud_only_proxy() as pair:
        yield pair


def drawn() -> list[Row]:
    present = [name for name in SETS if available(name, "report")]
    if len(present) < len(SETS):
        pytest.skip(f"outside sets absent: {sorted(set(SETS) - set(present))}")
    return [
        row
        for name in present
        for row in rows(name, "report", sample=PER_SET * 2, seed=31)
        if row.endpoint in PATHS
    ]


def test_what_leaves_is_what_the_detectors_let_go(leaving: tuple[Process, Process]) -> None:
    p, cloud = leaving
    names = Ner()
    chosen = drawn()
    assert {row.endpoint for row in chosen} == set(PATHS)  # every endpoint served is tried
    wrong: list[str] = []
    kept = 0
    client = httpx.Client(base_url=p.url, timeout=60)
    log = httpx.Client(base_url=cloud.url, timeout=60)  # the cloud simulator's request log
    with client, log:
        for row in chosen:
            log.delete("/_sim/requests")
            body: dict[str, Any] = {**row.body, "model": "m"}
            answer = client.post(PATHS[row.endpoint], json=body)
            flagged = bool(detected(names, row.body))
            kept += flagged
            expected = (503, 0) if flagged else (200, 1)
            if (answer.status_code, len(received(log))) != expected:
                wrong.append(f"{row.set}/{row.shape}: {answer.status_code} ({answer.text[:100]})")
    names.close()
    assert wrong == []
    assert 0 < kept < len(chosen)  # both kinds of outcome were tried
