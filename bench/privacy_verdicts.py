"""What a code tree's detectors decide on request bodies: one JSON line in (a body), one out
(the detectors that fired), as the proxy decides before a request leaves for a cloud: the
pattern scan every request pays, then the names models' detectors; at the names tagger's
"precise" threshold (a name keeps a request local) and, where the tree has it, at its
"thorough" one (a name sends it redacted).

Run as a child of bench/privacy_outside.py, with the tree to judge first on sys.path, so the
same bodies are judged by today's code and by an older tree in one run. It uses only calls
that both have (payload_of, scan, Ner.findings): nothing of the bench's own decides.

    python -c "import runpy, sys; sys.path.insert(0, TREE); runpy.run_path(THIS)" < bodies
"""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path
from typing import Any


def main() -> None:
    from policies.entities import ENTITY_DETECTORS
    from policies.payload import payload_of
    from policies.pii import DETECTORS, scan
    from proxy.legs.ner import Ner

    enabled = (*DETECTORS, *ENTITY_DETECTORS)
    names = Ner()
    thorough = "thorough" in inspect.signature(names.findings).parameters
    for line in sys.stdin:
        body: dict[str, Any] = json.loads(line)
        payload = payload_of(body)
        fired = scan(payload.texts, enabled).fired
        held = _held(fired, enabled)  # quasi-identifiers alone wait for the names screen
        fired = [name for name in fired if name not in held]
        screened = (*ENTITY_DETECTORS, *held)
        verdicts = {"precise": fired + names.findings(payload, screened).fired}
        if thorough:  # a tree whose names tagger has a second threshold
            verdicts["thorough"] = fired + names.findings(payload, screened, True).fired
        sys.stdout.write(json.dumps(verdicts) + "\n")
    names.close()


def _held(fired: list[str], enabled: tuple[str, ...]) -> tuple[str, ...]:
    """The tree's quasi-identifiers held for the names screen (none before it had them). Its
    own module or none: the project's editable install would find today's for an older tree."""
    import policies

    if not (Path(policies.__file__).parent / "quasi.py").is_file():
        return ()
    from policies.quasi import held_back

    return held_back(fired, enabled)


if __name__ == "__main__":
    main()
