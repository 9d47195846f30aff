"""Who is calling (pure): the tenant an API key belongs to, or the one a header names.

With `require_keys`, every request shows a key of a declared tenant. Without, a request may name
its tenant by header (or none), except a tenant that has keys, which must show one of them: a
header alone must not let anyone spend another team's limits or read its cache. A key that is
not ours is ignored when keys are optional: SDKs send one whether or not the server wants it.
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

    @classmethod
    def of(cls, policy: Policy) -> KeyRing:
        owners = {key: tenant.name for tenant in policy.tenants for key in tenant.api_keys}
        return cls(owners, frozenset(policy.auth.admin_keys))

    def is_admin(self, authorization: str | None) -> bool:
        """True when no admin key is configured, or the request shows one."""
        token = bearer(authorization)
        return not self.admins or (token is not None and digest(token) in self.admins)


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
