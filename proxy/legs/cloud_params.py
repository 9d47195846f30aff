"""Which of a client's body fields may travel to a cloud call: an allow-list per endpoint (pure;
the lists are the endpoint table's, proxy/endpoints.py).

litellm takes its own keyword arguments next to the API's parameters, and many of them are the
operator's alone: where the call goes (`api_base`, `base_url`, `custom_llm_provider`), with which
credential (`api_key`, `extra_headers`), at what price (`input_cost_per_token`), whether it is
made at all (`mock_response`) and what is called next (`fallbacks`). A body is hostile, so only
the OpenAI API's own request parameters leave it; everything else about a cloud call comes from
the policy. A field outside the list is dropped (and named in `X-Overspill-Dropped`), or refused
with a 400 where the policy says `[server] unlisted_params = "refuse"`.

Also left behind, although they are OpenAI parameters: `model` and `stream` (the proxy sets
them), `metadata` (it carries Overspill's own privacy and priority claims), `store` (whether the
provider keeps the conversation is the operator's call) and `service_tier` (it sets the price).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from proxy.endpoints import ENDPOINTS, Endpoint
from proxy.errors import BadRequest
from proxy.legs.cloud_shapes import check_shapes

Unlisted = Literal["drop", "refuse"]

SET_BY_PROXY = frozenset({"model", "stream"})
# They name the person behind a request (an e-mail address, often): not needed for an answer.
IDENTIFY_USER = frozenset({"user", "safety_identifier"})


@dataclass(frozen=True)
class Outbound:
    """The parameters a cloud call may take from the body, and the fields it left behind."""

    params: dict[str, Any]
    dropped: tuple[str, ...]


def outbound(
    endpoint: Endpoint,
    body: Mapping[str, Any],
    unlisted: Unlisted = "drop",
    send_user: bool = False,
) -> Outbound:
    """The body's parameters a cloud call takes. The fields that name the person behind a
    request (IDENTIFY_USER) are OpenAI parameters, yet withheld unless the policy's [privacy]
    send_user says so; they are named as dropped, never refused. A parameter of the wrong type
    is refused (proxy/legs/cloud_shapes.py), whichever way the call would go."""
    allowed = ENDPOINTS[endpoint].cloud_params
    if not send_user:
        allowed = allowed - IDENTIFY_USER
    params = {key: value for key, value in body.items() if key in allowed}
    dropped = [key for key in body if key not in allowed and key not in SET_BY_PROXY]
    unknown = sorted(key for key in dropped if key not in IDENTIFY_USER)
    if unknown and unlisted == "refuse":
        first = _printable(unknown[0])
        raise BadRequest(
            f"parameter '{first}' is not accepted on a request that goes to the cloud "
            f"(not an OpenAI {endpoint} parameter, or one only the operator sets)",
            param=first,
            code="unsupported_parameter",
        )
    check_shapes(params)
    return Outbound(params, tuple(sorted(dropped)))


def asks_usage(body: Mapping[str, Any]) -> bool:
    """Whether the client asked for a stream's usage chunk (the proxy always does, to price)."""
    options = body.get("stream_options")
    return isinstance(options, dict) and bool(options.get("include_usage"))


def dropped_header(dropped: tuple[str, ...]) -> bytes:
    """`X-Overspill-Dropped`: the names, each cut short, the whole at most 1,000 bytes."""
    names = ", ".join(_printable(name) for name in dropped)
    return names.encode("ascii", "replace")[:1000]


def _printable(name: str) -> str:
    """A client's field name, fit to echo in a header or message: printable ASCII, at most 64
    characters."""
    return "".join(c if c.isascii() and c.isprintable() else "?" for c in name[:64])
