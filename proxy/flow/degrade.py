"""What a route's [routes.degrade] offers a request under pressure (pure): the request as a
smaller model would take it, or the request with its answer capped, each with the note its
answer carries (X-Overspill-Degraded). The pipeline takes the smaller model when its backends
have room, else the cap."""

from __future__ import annotations

import dataclasses

from policies.model import Degrade
from proxy.schema import ProxyRequest

Offer = tuple[ProxyRequest, str]  # the request as it would be sent, and the note


def smaller_model(request: ProxyRequest, rule: Degrade) -> Offer | None:
    if rule.model is None:
        return None
    smaller = dataclasses.replace(
        request, model=rule.model, body={**request.body, "model": rule.model}
    )
    return smaller, f"model {request.model} -> {rule.model}"


def capped(request: ProxyRequest, rule: Degrade) -> Offer | None:
    """max_tokens (or max_completion_tokens, whichever the request uses) lowered to the rule's
    cap; None when there is no cap or the request already asks for no more."""
    asked = request.body.get("max_completion_tokens") or request.body.get("max_tokens")
    cap = rule.max_tokens
    if cap is None or (isinstance(asked, int) and asked <= cap):
        return None
    field = "max_completion_tokens" if "max_completion_tokens" in request.body else "max_tokens"
    return dataclasses.replace(request, body={**request.body, field: cap}), (
        f"max_tokens {asked or 'unset'} -> {cap}"
    )
