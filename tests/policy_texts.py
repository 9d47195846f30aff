"""What the policy tests share: the smallest valid backend, a text's problems, and every
detector mapped to a level that may not leave."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from policies.loader import PolicyError, parse_policy
from policies.pii import DETECTORS
from policies.reader import Problem

BACKEND = '[[backends]]\nname = "a"\nkind = "vllm"\nurl = "http://h:1"\n'  # lines 1-4
# Every built-in detector, each mapped to "restricted" (a level the policy must define).
EVERY_DETECTOR_RESTRICTED = "[privacy.detectors]\n" + "".join(
    f'{name} = "restricted"\n' for name in DETECTORS
)


def error_of(text: str, environ: Mapping[str, str] | None = None) -> PolicyError:
    """The loader's refusal of `text` (a test fails if it is accepted)."""
    with pytest.raises(PolicyError) as caught:
        parse_policy(text, "f.toml", environ)
    return caught.value


def problems_of(text: str, environ: Mapping[str, str] | None = None) -> list[Problem]:
    return error_of(text, environ).problems
