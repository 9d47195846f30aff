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
        verdicts = {"precise": fired + names.findings(payload, enabled).fired}
        if thorough:  # a tree whose names tagger has a second threshold
            verdicts["thorough"] = fired + names.findings(payload, enabled, True).fired
        sys.stdout.write(json.dumps(verdicts) + "\n")
    names.close()


if __name__ == "__main__":
    main()
