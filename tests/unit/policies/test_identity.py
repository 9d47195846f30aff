"""policies/identity.py: the tenant a key belongs to or a header names, and the admin key."""

from __future__ import annotations

import pytest

from policies.apikeys import digest
from policies.identity import Identity, KeyRing, Unidentified, WrongTenant, identify
from policies.model import Auth, Policy, Tenant

ACME_KEY = "sk-acme-0123456789"
GLOBEX_KEY = "sk-globex-abcdef"
ADMIN_KEY = "sk-admin-42"
TENANTS = (
    Tenant("acme", api_keys=(digest(ACME_KEY),)),
    Tenant("globex", api_keys=(digest("sk-globex-old"), digest(GLOBEX_KEY))),
    Tenant("guest"),
)


def policy(require_keys: bool = False, admin_keys: tuple[str, ...] = ()) -> Policy:
    return Policy(tenants=TENANTS, auth=Auth(require_keys, admin_keys))


def who(policy: Policy, key: str | None, named: str = "") -> Identity:
    authorization = None if key is None else f"Bearer {key}"
    return identify(policy, KeyRing.of(policy), authorization, named)


@pytest.mark.parametrize("require_keys", [False, True])
def test_a_key_of_a_tenant_identifies_that_tenant(require_keys: bool) -> None:
    assert who(policy(require_keys), ACME_KEY) == Identity("acme", by_key=True)
    assert who(policy(require_keys), GLOBEX_KEY) == Identity("globex", by_key=True)


@pytest.mark.parametrize("require_keys", [False, True])
def test_a_key_with_a_header_naming_its_own_tenant_is_accepted(require_keys: bool) -> None:
    assert who(policy(require_keys), ACME_KEY, "acme") == Identity("acme", by_key=True)


@pytest.mark.parametrize("named", ["globex", "guest", "nobody"])
@pytest.mark.parametrize("require_keys", [False, True])
def test_a_key_of_another_tenant_is_refused(require_keys: bool, named: str) -> None:
    with pytest.raises(WrongTenant) as caught:
        who(policy(require_keys), ACME_KEY, named)
    assert str(caught.value) == f"this API key belongs to tenant 'acme', not {named!r}"


@pytest.mark.parametrize("named", ["", "acme"])
def test_required_keys_refuse_a_request_without_a_key(named: str) -> None:
    with pytest.raises(Unidentified, match=r"^Missing API key"):
        who(policy(require_keys=True), None, named)


@pytest.mark.parametrize("named", ["", "guest"])
def test_required_keys_refuse_an_unknown_key(named: str) -> None:
    with pytest.raises(Unidentified, match=r"^Incorrect API key provided\.$"):
        who(policy(require_keys=True), "sk-not-ours", named)


def test_required_keys_refuse_an_authorization_that_is_not_bearer_as_missing() -> None:
    rules = policy(require_keys=True)
    with pytest.raises(Unidentified, match=r"^Missing API key"):
        identify(rules, KeyRing.of(rules), f"Basic {ACME_KEY}", "")


def test_required_keys_do_not_accept_the_admin_key_as_a_tenant_key() -> None:
    with pytest.raises(Unidentified, match=r"^Incorrect API key"):
        who(policy(require_keys=True, admin_keys=(digest(ADMIN_KEY),)), ADMIN_KEY)


def test_optional_keys_ignore_a_key_that_is_not_ours() -> None:
    assert who(policy(), "sk-some-sdk-default") == Identity("", by_key=False)
    assert who(policy(), "sk-some-sdk-default", "guest") == Identity("guest", by_key=False)


def test_optional_keys_let_a_header_name_a_tenant_without_keys() -> None:
    assert who(policy(), None, "guest") == Identity("guest", by_key=False)


def test_optional_keys_let_a_header_name_an_undeclared_tenant() -> None:
    assert who(policy(), None, "nobody") == Identity("nobody", by_key=False)


@pytest.mark.parametrize("key", [None, "sk-not-ours"])
def test_a_header_alone_cannot_name_a_tenant_that_has_keys(key: str | None) -> None:
    with pytest.raises(Unidentified) as caught:
        who(policy(), key, "acme")
    assert str(caught.value) == "tenant 'acme' requires one of its API keys"


def test_without_a_key_or_a_header_the_request_names_no_tenant() -> None:
    assert who(policy(), None) == Identity("", by_key=False)


def test_a_ring_maps_every_declared_key_to_its_tenant() -> None:
    ring = KeyRing.of(policy(admin_keys=(digest(ADMIN_KEY),)))
    assert ring.tenants == {
        digest(ACME_KEY): "acme",
        digest("sk-globex-old"): "globex",
        digest(GLOBEX_KEY): "globex",
    }
    assert ring.admins == frozenset({digest(ADMIN_KEY)})


@pytest.mark.parametrize("authorization", [None, "", "Bearer anything", f"Bearer {ACME_KEY}"])
def test_without_admin_keys_anyone_is_admin(authorization: str | None) -> None:
    assert KeyRing.of(policy()).is_admin(authorization)


def test_with_admin_keys_the_admin_key_is_admin() -> None:
    ring = KeyRing.of(policy(admin_keys=(digest("sk-other-admin"), digest(ADMIN_KEY))))
    assert ring.is_admin(f"Bearer {ADMIN_KEY}")
    assert ring.is_admin(f"bearer  {ADMIN_KEY} ")


@pytest.mark.parametrize(
    "authorization",
    [None, "", "Bearer", "Bearer sk-wrong", f"Basic {ADMIN_KEY}", ADMIN_KEY, f"Bearer {ACME_KEY}"],
    ids=["none", "empty", "no token", "wrong key", "basic", "no scheme", "a tenant key"],
)
def test_with_admin_keys_anything_else_is_not_admin(authorization: str | None) -> None:
    assert not KeyRing.of(policy(admin_keys=(digest(ADMIN_KEY),))).is_admin(authorization)
