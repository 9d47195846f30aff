"""The demo traffic's request mix (pure): what a help desk and a research team send.

Popular questions come back again and again, sometimes in other words (exact and semantic cache
hits); some requests carry personal data, an e-mail address or a phone number (they must stay
local); the rest ask for something new, sampled at a temperature (never cached: they fill the
engines and overflow to the cloud). Two tenants: "support" names itself by header, "research"
shows its API key. Half the requests are streamed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from proxy.demo.config import PUBLIC_MODEL, TENANTS, DemoTenant

# Each question, then ways of asking the same that the semantic cache should recognise.
_SUPPORT_QUESTIONS = (
    (
        "How do I reset my password?",
        "How can I reset my password?",
        "What are the steps to reset my password?",
    ),
    ("How do I cancel my subscription?", "How can I cancel my subscription?"),
    ("How long does shipping take?", "How long will shipping take?"),
    ("Do you ship internationally?", "Do you also ship internationally?"),
    ("Which payment methods do you accept?", "What payment methods do you accept?"),
    ("How do I change my delivery address?", "How can I change my delivery address?"),
    ("Where can I download my invoices?", "Where do I download my invoices?"),
    ("How do I contact customer support?", "How can I contact customer support?"),
)
_RESEARCH_QUESTIONS = (
    (
        "What is the difference between precision and recall?",
        "What's the difference between precision and recall?",
    ),
    ("Explain what a transformer model is.", "Explain what transformer models are."),
    ("What is gradient descent?", "What is gradient descent, briefly?"),
    ("Why do we normalise input features?", "Why should we normalise input features?"),
)
_NEW_WORK = (
    "Write a short poem about {}.",
    "Suggest three names for a product about {}.",
    "Write a haiku about {}.",
    "Draft a tweet announcing {}.",
    "Give me a fun fact about {}.",
)
_TOPICS = (
    "autumn",
    "coffee",
    "bicycles",
    "the sea",
    "a new release",
    "mountains",
    "trains",
    "tea",
    "robots",
    "the city at night",
    "gardening",
    "jazz",
)
_NAMES = ("anna", "ben", "chloe", "david", "emma", "farid", "grace", "hugo", "ines", "jonas")
_SYSTEM = {
    "support": "You answer customers of an online shop, briefly.",
    "research": "You are a concise research assistant.",
}
_ANSWER_TOKENS = 48  # for cacheable questions: the same every time, or no repeat would match


@dataclass(frozen=True)
class Planned:
    """One request of the mix, and what kind it is (for the summary)."""

    kind: str  # one of KINDS
    tenant: str
    body: dict[str, Any]
    headers: dict[str, str]

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))


KINDS = ("popular question", "paraphrase", "personal data", "new, sampled")


def plan(rng: random.Random) -> Planned:
    """The next request: 35% popular questions (a third of them paraphrased), 15% with personal
    data, 50% new work; four in five from "support"."""
    tenant = TENANTS[0] if rng.random() < 0.8 else TENANTS[1]
    draw = rng.random()
    if draw < 0.35:
        kind, text, params = _question(rng, tenant.name)
    elif draw < 0.50:
        kind, text, params = "personal data", _personal(rng), _sampling(rng)
    else:
        kind, text, params = "new, sampled", _new_work(rng), _sampling(rng)
    body = {
        "model": PUBLIC_MODEL,
        "messages": [
            {"role": "system", "content": _SYSTEM[tenant.name]},
            {"role": "user", "content": text},
        ],
        **params,
    }
    if rng.random() < 0.5:
        body["stream"] = True
    return Planned(kind, tenant.name, body, _identity(tenant))


def _question(rng: random.Random, tenant: str) -> tuple[str, str, dict[str, Any]]:
    bank = _SUPPORT_QUESTIONS if tenant == "support" else _RESEARCH_QUESTIONS
    # A few questions are asked far more often than the rest (weights 1, 1/2, 1/3, ...).
    wordings = rng.choices(bank, weights=[1 / (k + 1) for k in range(len(bank))])[0]
    if rng.random() < 1 / 3:
        return "paraphrase", rng.choice(wordings[1:]), {"max_tokens": _ANSWER_TOKENS}
    # No temperature, as most clients send: the demo's route caches such requests.
    return "popular question", wordings[0], {"max_tokens": _ANSWER_TOKENS}


def _personal(rng: random.Random) -> str:
    name = rng.choice(_NAMES)
    order = rng.randrange(10_000, 99_999)
    if rng.random() < 0.5:
        return f"Draft a reply to {name}.{rng.randrange(100)}@exemplo.com about order {order}."
    phone = f"+1 415 555 {rng.randrange(10_000):04d}"
    return f"Summarise the call with {name.title()} ({phone}) about order {order}."


def _new_work(rng: random.Random) -> str:
    return rng.choice(_NEW_WORK).format(rng.choice(_TOPICS))


def _sampling(rng: random.Random) -> dict[str, Any]:
    return {"temperature": 0.8, "max_tokens": rng.randrange(24, 65)}


def _identity(tenant: DemoTenant) -> dict[str, str]:
    if tenant.key is not None:
        return {"authorization": f"Bearer {tenant.key}"}
    return {"x-overspill-tenant": tenant.name}
