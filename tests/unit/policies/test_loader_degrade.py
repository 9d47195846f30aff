"""[routes.degrade] in the policy file: a smaller model and a max_tokens cap, validated."""

from __future__ import annotations

import pytest

from policies.loader import PolicyError, parse_policy
from policies.model import Degrade

BASE = """
[[backends]]
name = "a"
kind = "vllm"
url = "http://a:1"
[[routes]]
model = "m"
[routes.degrade]
"""


def test_a_route_may_degrade_to_a_smaller_model_or_fewer_tokens() -> None:
    policy = parse_policy(BASE + 'model = "m-small"\nmax_tokens = 256\n')
    assert policy.routes[0].degrade == Degrade("m-small", 256)
    assert parse_policy(BASE).routes[0].degrade == Degrade()


@pytest.mark.parametrize(
    ("text", "path", "message"),
    [
        ('model = "m"\n', "routes[0].degrade.model", "must be another model than the route's"),
        ("max_tokens = 0\n", "routes[0].degrade.max_tokens", "must be greater than 0"),
        ("tokens = 5\n", "routes[0].degrade.tokens", "unknown key"),
    ],
)
def test_a_bad_degrade_is_reported_at_its_key(text: str, path: str, message: str) -> None:
    with pytest.raises(PolicyError) as caught:
        parse_policy(BASE + text)
    problems = {problem.key: problem.message for problem in caught.value.problems}
    assert message in problems[path]
