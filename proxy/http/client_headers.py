"""A request's headers as the request path reads them, with every repeat resolved (pure).

HTTP lets a header be sent more than once, and a gateway in front may append its own value to a
client's (`X-Overspill-Privacy: public` from the client, `restricted` from the gateway). So:
- a header whose values combine is joined with ", ", as HTTP defines, and its reader takes the
  strictest item (privacy: the strictest level; priority: the least urgent class);
- a header that names one thing (a credential, a tenant) sent twice is refused: there is no safe
  way to pick one;
- the tenant's name is bounded, as it keys per-tenant bookkeeping.
"""

from __future__ import annotations

from collections.abc import Iterable

from proxy.errors import BadRequest

SINGLE = frozenset({"authorization", "x-overspill-tenant"})
MAX_TENANT_CHARS = 128


def client_headers(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    headers: dict[str, str] = {}
    # A repeated header's values are collected, then joined once: joined as they came, the
    # text so far was copied again for every repeat (256,000 repeats of one header held the
    # event loop for over a minute).
    repeats: dict[str, list[str]] = {}
    for raw_name, raw_value in raw:
        name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
        if name not in headers:
            headers[name] = value
        elif name in SINGLE:
            raise BadRequest(f"header {name} was sent more than once", code="duplicate_header")
        elif name in repeats:
            repeats[name].append(value)
        else:
            repeats[name] = [headers[name], value]
    for name, values in repeats.items():
        headers[name] = ", ".join(values)
    tenant = headers.get("x-overspill-tenant", "")
    if len(tenant) > MAX_TENANT_CHARS or not tenant.isprintable():
        raise BadRequest(
            f"header x-overspill-tenant must be printable and at most "
            f"{MAX_TENANT_CHARS} characters",
            code="invalid_tenant",
        )
    return headers
