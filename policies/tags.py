"""Unicode tag characters (U+E0000-U+E007F): text a model reads and nobody sees (pure).

Each printable ASCII character has a tag twin, drawn as nothing: "ignore the question" written
in tags is invisible on a screen, to the embedder and to the privacy detectors, yet language
models read it as the plain letters. So a question with a hidden instruction was stored and
served to the plain question's askers at similarity 1.0, and a card number in tags reached the
cloud (issue 30). Their one visible use is an emoji's subdivision flag (U+1F3F4, a region code
of a few lowercase letters or digits in tags, then the cancel tag U+E007F): that is kept, and a
request with any other tag character is refused, so the cache, the detectors and what leaves
all read the same text.
"""

from __future__ import annotations

import re
from typing import Any

from policies.payload import walk_texts

# A subdivision flag: black flag, a region's code in tags (ISO 3166-2: a country's two letters,
# then one to three letters or digits, as "gbsct"), cancel tag. No longer: a flag's tags were
# a way to carry 7 characters at a time past the detectors (they read the tags as ASCII).
_FLAG = re.compile(
    "\U0001f3f4[\U000e0061-\U000e007a]{2}[\U000e0030-\U000e0039\U000e0061-\U000e007a]{1,3}"
    "\U000e007f"
)
_TAG = re.compile("[\U000e0000-\U000e007f]")
# Tags as a body's bytes carry them: UTF-8 (F3 A0 80-81 ..), or a JSON escape of their high
# surrogate (\uDB40), in any case. A search in C over the raw body: most bodies have none.
_RAW_TAG = re.compile(rb"\xf3\xa0[\x80\x81]|\\u[dD][bB]40")


def may_hide_tags(raw: bytes) -> bool:
    """Whether a body's bytes may carry a tag character (no false negative)."""
    return _RAW_TAG.search(raw) is not None


def hidden_tags(body: dict[str, Any]) -> str | None:
    """Where the first string with a tag character outside a flag sits (its path), if any.
    Field names are read too: a model reads a JSON schema's keys."""
    for path, text in walk_texts(body):
        if _TAG.search(text) and _TAG.search(_FLAG.sub("", text)):
            return path
    return None
