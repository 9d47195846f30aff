"""The names model on the request path (proxy/flow/legs.py, proxy/legs/ner.py): it reads only
what would leave for a cloud, once per request; what it finds raises the level (the request
stays local or is refused) or is redacted; a model that fails or is late counts as a finding.
The real Pipeline with scripted legs; the model is a list of names, behind the real Ner."""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence

import orjson

from proxy.legs.ner import Ner
from proxy.schema import parse_request
from tests.unit.proxy.pipeline_harness import POLICY, Harness, ask, harness, refused

NAMES = ["Ada Byron", "Olu Adeyemi"]


class ListedPeople(Ner):
    """A names model that knows a few names; counts the texts it was asked to read."""

    def __init__(self, names: Sequence[str] = NAMES, fails: bool = False) -> None:
        super().__init__()
        self.names, self.fails = names, fails
        self.read: list[str] = []
        self.thorough: list[bool] = []  # per request read, whether at the thorough threshold
        self.release: threading.Event | None = None  # when given, it waits for it

    def _load(self) -> None:
        pass  # nothing to load

    def people(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        self.read += texts
        if self.release is not None:
            self.release.wait(10)
        if self.fails:
            raise RuntimeError("model broke")
        return [[(t.index(n), t.index(n) + len(n)) for n in self.names if n in t] for t in texts]

    def tagged(
        self, texts: Sequence[str], thorough: bool = False, deadline: float = math.inf
    ) -> list[list[tuple[int, int]]]:
        self.thorough.append(thorough)
        if not thorough:
            return [[] for _ in texts]  # sure of no name: the English model's decide
        return [[(t.index(n), t.index(n) + len(n)) for n in self.names if n in t] for t in texts]


def with_names(policy_text: str, names: ListedPeople, local_up: bool = False) -> Harness:
    h = harness({"a": [b"" if local_up else refused()], "b": [refused()]}, policy_text)
    h.pipeline.runtime.ner = names
    if not local_up:
        for monitor in h.pipeline.runtime.backends.monitors.values():  # only the cloud is left
            monitor.healthy, monitor.error = False, "probe failed"
    return h


KEPT = POLICY + '\n[privacy.detectors]\nperson = "restricted"\nmedical = "restricted"\n'
REDACTING = (
    POLICY.replace(
        'levels = [{ name = "public" }, { name = "restricted", cloud = "none" }]',
        'levels = [{ name = "public" }, { name = "personal", redact = true },'
        ' { name = "restricted", cloud = "none" }]',
    )
    + '\n[privacy.detectors]\nperson = "personal"\nemail = "personal"\n'
)


async def test_a_request_served_locally_never_meets_the_names_model() -> None:
    names = ListedPeople()
    h = with_names(KEPT, names, local_up=True)
    h.engines.script["a"] = [b'{"choices": []}']
    sent = await h.send(ask("Ring Ada Byron about the invoice"))
    assert sent.status == 200
    assert sent.headers["x-overspill-route"] == "local/a"
    assert names.read == []


async def test_a_name_keeps_the_request_from_a_cloud_its_level_forbids() -> None:
    names = ListedPeople()
    h = with_names(KEPT, names)
    sent = await h.send(ask("Ring Ada Byron about the invoice"))
    assert sent.status == 503
    assert sent.headers["x-should-retry"] == "false"  # final: the name will still be there
    assert sent.headers["x-overspill-privacy"] == "restricted"
    because = "detected person in messages[0].content: restricted"
    assert because in sent.headers["x-overspill-privacy-because"]
    assert because in sent.json["error"]["message"]
    # a false flag would cost the overflow: the precise threshold decides (the thorough reading
    # only confirms the English model's names)
    assert names.thorough == [False, True]
    assert "Ada" not in sent.json["error"]["message"]  # why, never what
    assert h.cloud.received == []


class EnglishOnly(ListedPeople):
    """The English model takes the listed words for a name; the multilingual tagger sees none."""

    def tagged(
        self, texts: Sequence[str], thorough: bool = False, deadline: float = math.inf
    ) -> list[list[tuple[int, int]]]:
        self.thorough.append(thorough)
        return [[] for _ in texts]


async def test_a_name_only_the_english_model_sees_does_not_keep_a_request() -> None:
    """Spanish to the English model: "Fecha de Ingreso" is two capitalised words."""
    names = EnglishOnly(("Fecha de Ingreso",))
    h = with_names(KEPT, names)
    sent = await h.send(ask("Fecha de Ingreso: 04/12/2017. Resume el informe."))
    assert sent.status == 200
    assert sent.headers["x-overspill-route"] == "cloud/mini"
    assert names.thorough == [False, True]


async def test_a_request_without_names_leaves_as_it_came() -> None:
    names = ListedPeople()
    h = with_names(KEPT, names)
    sent = await h.send(ask("Ring the office about the invoice"))
    assert sent.status == 200
    assert sent.headers["x-overspill-route"] == "cloud/mini"
    assert sent.headers["x-overspill-privacy"] == "public"
    assert names.read == ["Ring the office about the invoice"]


async def test_names_leave_as_placeholders_and_come_back() -> None:
    names = ListedPeople()
    h = with_names(REDACTING, names)
    h.cloud.echo = True
    text = "Tell Olu Adeyemi (olu@exemplo.com) that Ada Byron and Olu Adeyemi agreed"
    sent = await h.send(ask(text))
    assert sent.status == 200
    left = h.cloud.received[0]["messages"][0]["content"]
    assert left == "Tell <PERSON_1> (<EMAIL_1>) that <PERSON_2> and <PERSON_1> agreed"
    assert sent.json["choices"][0]["message"]["content"] == text
    assert sent.headers["x-overspill-privacy"] == "personal"
    assert names.thorough == [True]  # a false flag costs a placeholder: the lower threshold


async def test_a_late_names_model_counts_as_a_finding() -> None:
    names = ListedPeople()
    names.release = threading.Event()
    h = with_names(KEPT.replace("[privacy]", "[privacy]\nscan_timeout_s = 0.05"), names)
    try:
        sent = await h.send(ask("nothing personal here at all"))
    finally:
        names.release.set()
    assert sent.status == 503
    assert "person: not checked in time" in sent.json["error"]["message"]
    assert h.cloud.received == []


async def test_a_failing_names_model_counts_as_a_finding() -> None:
    h = with_names(KEPT, ListedPeople(fails=True))
    sent = await h.send(ask("nothing personal here at all"))
    assert sent.status == 503
    assert "person: the names model failed" in sent.json["error"]["message"]
    assert h.cloud.received == []


async def test_text_past_the_models_limit_counts_as_a_finding() -> None:
    names = ListedPeople()
    h = with_names(KEPT, names)
    sent = await h.send(ask("word " * 30_000))
    assert sent.status == 503
    assert "beyond the names model's limit" in sent.json["error"]["message"]
    assert names.read == []  # not even tried


TWO_CLOUDS = KEPT.replace('cloud = ["mini"]', 'cloud = ["mini", "maxi"]').replace(
    "[[routes]]", '[[clouds]]\nname = "maxi"\nmodel = "openai/gpt-4o"\n\n[[routes]]'
)


async def test_the_names_model_reads_a_request_once_whatever_the_clouds_it_tries() -> None:
    names = ListedPeople()
    h = with_names(TWO_CLOUDS, names)
    sent = await h.send(ask("Ring Ada Byron about the invoice"))
    assert sent.status == 503
    assert "mini may not take it" in sent.json["error"]["message"]
    assert "maxi may not take it" in sent.json["error"]["message"]
    assert names.read == ["Ring Ada Byron about the invoice"]  # once, for both


async def test_explain_says_what_the_names_model_would_find_before_leaving() -> None:
    h = with_names(KEPT, ListedPeople())
    request = parse_request("chat", orjson.dumps(ask("Ring Ada Byron about the invoice")))
    privacy, plan = await h.pipeline.explain(request, {})
    assert privacy.level == "restricted"
    assert "detected person in messages[0].content: restricted" in privacy.reasons
    assert any(r.startswith("privacy=public: mini may not take it") for r in plan.reasons)
    assert h.cloud.received == []  # explain sends nothing


BIRTHS = KEPT + 'date_of_birth = "restricted"\n'


class LeaningOnly(ListedPeople):
    """Only the multilingual tagger, at its thorough threshold, leans toward the names."""

    def people(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        self.read += texts
        return [[] for _ in texts]


async def test_a_birth_date_alone_leaves_for_the_cloud() -> None:
    """A quasi-identifier: alone it names nobody (policies/quasi.py)."""
    h = with_names(BIRTHS, LeaningOnly())
    sent = await h.send(ask("Date of birth: 1960-03-12. How old is that in 2026?"))
    assert sent.status == 200
    assert sent.headers["x-overspill-route"] == "cloud/mini"
    assert sent.headers["x-overspill-privacy"] == "public"


async def test_a_birth_date_beside_a_name_the_tagger_leans_to_stays_local() -> None:
    names = LeaningOnly()
    h = with_names(BIRTHS, names)
    sent = await h.send(ask("Olu Adeyemi, date of birth: 1960-03-12. How old is he?"))
    assert sent.status == 503
    assert "detected date_of_birth in messages[0].content" in sent.json["error"]["message"]
    assert "person" not in sent.json["error"]["message"]  # the name alone would not keep it
    assert h.cloud.received == []


async def test_explain_says_a_held_birth_date_counts_beside_a_name() -> None:
    h = with_names(BIRTHS, LeaningOnly())
    body = ask("Olu Adeyemi, date of birth: 1960-03-12")
    privacy, _ = await h.pipeline.explain(parse_request("chat", orjson.dumps(body)), {})
    assert privacy.level == "restricted"
    assert "detected date_of_birth in messages[0].content: restricted" in privacy.reasons
