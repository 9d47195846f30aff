"""What the policy loader's tests share: the smallest valid backend, and a text's problems."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from policies.loader import PolicyError, parse_policy
from policies.reader import Problem

BACKEND = '[[backends]]\nname = "a"\nkind = "vllm"\nurl = "http://h:1"\n'  # lines 1-4


def error_of(text: str, environ: Mapping[str, str] | None = None) -> PolicyError:
    """The loader's refusal of `text` (a test fails if it is accepted)."""
    with pytest.raises(PolicyError) as caught:
        parse_policy(text, "f.toml", environ)
    return caught.value


def problems_of(text: str, environ: Mapping[str, str] | None = None) -> list[Problem]:
    return error_of(text, environ).problems
