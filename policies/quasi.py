"""Quasi-identifiers: data that names nobody alone, and someone beside an identifier (pure).

A date of birth on its own ("Fecha de nacimiento: 12/03/1960" in a case report, "born
1990-05-03" in an age question) picks out no one among the millions born that day; the same
date beside a name, an e-mail address or a record number narrows that person down to one.
Outside sets label it so: MEDDOCAN counts dates as quasi-identifiers, not as personal data,
and a third of the clean lines the pattern scan kept local on its tune split were a birth date
alone.

So a quasi-identifier counts at once when another detector fired on the request too (any
pattern detector finds something that stands for a person or their account). When it fired
alone and the policy screens names before a request leaves (the `person` detector is on),
it is held for that screen (policies/entities.py): it counts there if a name is found, or
the names tagger leans toward one anywhere in the request. Without that screen it counts
alone, as before: a policy that reads no names cannot tell that none is there.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

QUASI_IDENTIFIERS = ("date_of_birth",)


def held_back(fired: Sequence[str], detectors: Collection[str]) -> tuple[str, ...]:
    """The quasi-identifiers among `fired` (the pattern scan's detectors) that do not count
    yet, but are held for the names screen before the request leaves: those that fired with
    no other detector, when the policy's `detectors` include `person`."""
    quasi = tuple(name for name in fired if name in QUASI_IDENTIFIERS)
    alone = len(quasi) == len(fired)
    return quasi if quasi and alone and "person" in detectors else ()
