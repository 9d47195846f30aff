"""Log probabilities of an answer's tokens, in the shape of OpenAI's chat API (pure).

A token's entry depends only on the token and its position in the answer, so the same answer
has the same logprobs, whole or streamed, every time. The generated token is the most likely
one (probability 0.5 to 0.99); `top_logprobs` alternatives, drawn from the simulator's
vocabulary, share what is left in halves, so the probabilities never add up to more than 1.
"""

from __future__ import annotations

import hashlib
import math
import random
from typing import Any

from proxy.sim.tokens import VOCABULARY

MAX_TOP_LOGPROBS = 20  # OpenAI's limit


def entry(token: str, position: int, top: int) -> dict[str, Any]:
    """One token's `choices[].logprobs.content[]` entry, with `top` alternatives."""
    rng = random.Random(_seed(token, position))
    chosen = 0.5 + 0.49 * rng.random()
    others = [word for word in VOCABULARY if word != token]
    alternatives = rng.sample(others, min(max(top - 1, 0), len(others)))
    ranked = [(token, chosen)]
    ranked += [(word, (1 - chosen) / 2 ** (i + 1)) for i, word in enumerate(alternatives)]
    return {
        **_scored(token, chosen),
        "top_logprobs": [_scored(word, p) for word, p in ranked[:top]],
    }


def _scored(token: str, probability: float) -> dict[str, Any]:
    return {
        "token": token,
        "logprob": round(math.log(probability), 6),
        "bytes": list(token.encode()),
    }


def _seed(token: str, position: int) -> int:
    digest = hashlib.blake2b(f"{position}\x00{token}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")
