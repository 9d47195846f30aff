"""policies/identity.py: with keys required of every caller and no admin key declared, the admin
endpoints are closed to everyone (they were open to anyone), and the operator is told how to
open them; without required keys they stay open, as before."""

from __future__ import annotations

import pytest

from policies.apikeys import digest
from policies.identity import KeyRing, admin_warning
from policies.model import Auth, Policy, Tenant

ACME_KEY = "sk-acme-1"
ADMIN_KEY = "sk-admin-1"


def policy(require_keys: bool, admin_keys: tuple[str, ...] = ()) -> Policy:
    acme = Tenant("acme", api_keys=(digest(ACME_KEY),))
    return Policy(tenants=(acme,), auth=Auth(require_keys, admin_keys))


@pytest.mark.parametrize("authorization", [None, "", f"Bearer {ACME_KEY}", "Bearer sk-x"])
def test_required_keys_without_an_admin_key_admit_no_admin(authorization: str | None) -> None:
    assert not KeyRing.of(policy(require_keys=True)).is_admin(authorization)


def test_required_keys_with_an_admin_key_admit_that_key_alone() -> None:
    ring = KeyRing.of(policy(require_keys=True, admin_keys=(digest(ADMIN_KEY),)))
    assert ring.is_admin(f"Bearer {ADMIN_KEY}")
    assert not ring.is_admin(f"Bearer {ACME_KEY}")
    assert admin_warning(policy(True, (digest(ADMIN_KEY),))) is None


def test_optional_keys_without_an_admin_key_leave_the_admin_endpoints_open() -> None:
    assert KeyRing.of(policy(require_keys=False)).is_admin(None)


def test_open_admin_endpoints_beside_keyed_tenants_are_warned_of() -> None:
    """Open to anyone, they show keyed tenants' spend and traffic (issue 30's second review)."""
    warning = admin_warning(policy(require_keys=False))
    assert warning is not None
    assert "open to anyone" in warning
    assert admin_warning(Policy()) is None  # nobody needs a key: nothing to protect


def test_the_warning_names_the_setting_and_how_to_open_them() -> None:
    warning = admin_warning(policy(require_keys=True))
    assert warning is not None
    assert "require_keys = true and no admin_keys" in warning
    assert "/admin/status" in warning
    assert 'admin_keys = ["env:OVERSPILL_ADMIN_KEY"]' in warning
