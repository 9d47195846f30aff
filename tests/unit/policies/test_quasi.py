"""A date of birth is a quasi-identifier (policies/quasi.py): alone it counts only where the
screen before leaving finds a name, or the policy reads no names; beside another detector's
find it counts at once (policies/privacy.py), and the screen decides the rest
(policies/entities.py)."""

from __future__ import annotations

from typing import Any

import pytest

from policies.entities import found, unchecked
from policies.model import Privacy, PrivacyLevel
from policies.payload import payload_of
from policies.privacy import classify
from policies.quasi import held_back

LEVELS = (PrivacyLevel("public"), PrivacyLevel("restricted", "none"))
WITH_NAMES = {"date_of_birth": "restricted", "email": "restricted", "person": "restricted"}
BORN = "Fecha de nacimiento: 12/03/1960"


def chat(*texts: str) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": text} for text in texts]}


@pytest.mark.parametrize(
    ("fired", "detectors", "held"),
    [
        (["date_of_birth"], WITH_NAMES, ("date_of_birth",)),
        (["email", "date_of_birth"], WITH_NAMES, ()),  # beside an identifier: counts at once
        (["date_of_birth"], {"date_of_birth": "restricted"}, ()),  # no names screen to wait for
        (["email"], WITH_NAMES, ()),
        ([], WITH_NAMES, ()),
    ],
)
def test_a_birth_date_alone_waits_for_the_names_screen(
    fired: list[str], detectors: dict[str, str], held: tuple[str, ...]
) -> None:
    assert held_back(fired, detectors) == held


def test_a_birth_date_alone_leaves_the_level_as_it_was_and_is_held() -> None:
    got = classify(Privacy(LEVELS, "public", WITH_NAMES), header=None, body=chat(BORN), tenant=None)
    assert (got.level, got.held) == ("public", ("date_of_birth",))
    assert got.detected  # personal data, maybe: not shared across callers in the cache


def test_a_birth_date_beside_an_email_address_counts_at_once() -> None:
    body = chat(BORN, "write to ana.ruiz@correo.es")
    got = classify(Privacy(LEVELS, "public", WITH_NAMES), header=None, body=body, tenant=None)
    assert (got.level, got.held) == ("restricted", ())
    assert any("date_of_birth" in reason for reason in got.reasons)


def test_without_a_names_screen_a_birth_date_alone_counts() -> None:
    privacy = Privacy(LEVELS, "public", {"date_of_birth": "restricted"})
    got = classify(privacy, header=None, body=chat(BORN), tenant=None)
    assert (got.level, got.held) == ("restricted", ())


def test_the_screen_counts_a_held_birth_date_where_the_tagger_leans_to_a_name() -> None:
    payload = payload_of(chat("Paciente: Ernesto Soto", BORN))
    enabled = ("person", "date_of_birth")
    leaning = {0: [(10, 22)]}
    seen = found(payload, enabled, {0: []}, {0: []}, leaning)
    assert seen.fired == ["date_of_birth"]
    assert seen.values["date_of_birth"] == ("12/03/1960",)
    assert seen.where["date_of_birth"] == "messages[1].content"


def test_the_screen_counts_a_held_birth_date_beside_a_found_name() -> None:
    payload = payload_of(chat("Paciente: Ernesto Soto", BORN))
    seen = found(payload, ("person", "date_of_birth"), {}, {0: [(10, 22)]}, {0: [(10, 22)]})
    assert seen.fired == ["person", "date_of_birth"]


def test_the_screen_lets_a_birth_date_without_a_name_go() -> None:
    payload = payload_of(chat("Varón de 45 años.", BORN))
    seen = found(payload, ("person", "date_of_birth"), {0: []}, {0: []}, {0: []})
    assert seen.fired == []


def test_a_birth_date_not_held_is_not_screened() -> None:
    payload = payload_of(chat("Paciente: Ernesto Soto", BORN))
    seen = found(payload, ("person",), {}, {0: [(10, 22)]}, {0: [(10, 22)]})
    assert seen.fired == ["person"]


def test_a_screen_that_could_not_read_counts_the_held_birth_date() -> None:
    assert unchecked(("person", "date_of_birth"), "not checked in time").fired == [
        "person",
        "date_of_birth",
    ]
