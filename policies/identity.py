"""Who is calling (pure): the tenant an API key belongs to, or the one a header names.

With `require_keys`, every request shows a key of a declared tenant. Without, a request may name
its tenant by header (or none), except a tenant that has keys, which must show one of them: a
header alone must not let anyone spend another team's limits or read its cache. A key that is
not ours is ignored when keys are optional: SDKs send one whether or not the server wants it.

The admin endpoints take an admin key when any is declared. With none they are open only where
no caller needs a key at all: a proxy that requires keys of its tenants and declares no admin
key keeps them closed (every request gets 401), never open to anyone (`admin_warning` says so
at start).
"""

from __future__ import annotations

from dataclasses import dataclass

from policies.apikeys import bearer, digest
from policies.model import Policy


@dataclass(frozen=True)
class Identity:
    tenant: str  # "" for a request that names no tenant
    by_key: bool


class Unidentified(Exception):
    """401: no key, or not a key of ours, where one is needed."""


class WrongTenant(Exception):
    """403: a key of one tenant with a header naming another."""


@dataclass(frozen=True)
class KeyRing:
    tenants: dict[str, str]  # key digest -> tenant name
    admins: frozenset[str]
    admin_open: bool = False  # no admin key asked: none is declared, and no key is required

    @classmethod
    def of(cls, policy: Policy) -> KeyRing:
        owners = {key: tenant.name for tenant in policy.tenants for key in tenant.api_keys}
        admins = frozenset(policy.auth.admin_keys)
        return cls(owners, admins, admin_open=not admins and not policy.auth.require_keys)

    def is_admin(self, authorization: str | None) -> bool:
        """True when the admin endpoints are open, or the request shows an admin key."""
        if self.admin_open:
            return True
        token = bearer(authorization)
        return token is not None and digest(token) in self.admins


def admin_warning(policy: Policy) -> str | None:
    """What to tell the operator at start when the admin endpoints answer no one, or anyone
    while some callers need a key."""
    if policy.auth.admin_keys:
        return None
    if policy.auth.require_keys:
        return (
            "[auth] require_keys = true and no admin_keys: /admin/status, /admin/traffic, "
            "/admin/reload and /admin/explain answer 401 to everyone. To use them, declare a "
            'key: admin_keys = ["env:OVERSPILL_ADMIN_KEY"] (or "sha256:<hex>")'
        )
    if any(tenant.api_keys for tenant in policy.tenants):
        return (
            "[auth] no admin_keys: /admin/status, /admin/traffic, /admin/reload and "
            "/admin/explain are open to anyone who reaches this port, keyed tenants' spend and "
            "traffic included. Declare a key to close them: "
            'admin_keys = ["env:OVERSPILL_ADMIN_KEY"] (or "sha256:<hex>")'
        )
    return None


def identify(policy: Policy, ring: KeyRing, authorization: str | None, named: str) -> Identity:
    token = bearer(authorization)
    owner = ring.tenants.get(digest(token)) if token else None
    if owner is not None:
        if named and named != owner:
            raise WrongTenant(f"this API key belongs to tenant {owner!r}, not {named!r}")
        return Identity(owner, by_key=True)
    if policy.auth.require_keys:
        raise Unidentified(
            "Incorrect API key provided."
            if token
            else "Missing API key: send it as `Authorization: Bearer <key>`."
        )
    tenant = policy.tenant(named)
    if tenant is not None and tenant.api_keys:
        raise Unidentified(f"tenant {named!r} requires one of its API keys")
    return Identity(named, by_key=False)
