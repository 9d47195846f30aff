"""proxy/http/client_headers.py:
repeated headers join or are refused; the tenant name is bounded."""

from __future__ import annotations

import pytest

from proxy.errors import BadRequest
from proxy.http.client_headers import client_headers


def raw(*pairs: tuple[str, str]) -> list[tuple[bytes, bytes]]:
    return [(name.encode(), value.encode()) for name, value in pairs]


def test_names_are_lowercased_and_single_values_kept() -> None:
    assert client_headers(raw(("X-Overspill-Privacy", "public"))) == {
        "x-overspill-privacy": "public"
    }


def test_a_combinable_header_sent_twice_is_joined_in_order() -> None:
    headers = client_headers(
        raw(("x-overspill-privacy", "public"), ("X-Overspill-Privacy", "restricted"))
    )
    assert headers["x-overspill-privacy"] == "public, restricted"


@pytest.mark.parametrize("name", ["authorization", "x-overspill-tenant", "Authorization"])
def test_a_header_naming_one_thing_sent_twice_is_refused(name: str) -> None:
    with pytest.raises(BadRequest) as refused:
        client_headers(raw((name, "sk-secret-1"), (name, "sk-secret-2")))
    assert refused.value.code == "duplicate_header"
    assert "sk-secret" not in refused.value.message  # a credential is never echoed


@pytest.mark.parametrize("tenant", ["t" * 129, "acme\x00", "acme\n"])
def test_a_tenant_name_too_long_or_unprintable_is_refused(tenant: str) -> None:
    with pytest.raises(BadRequest) as refused:
        client_headers(raw(("x-overspill-tenant", tenant)))
    assert refused.value.code == "invalid_tenant"


def test_a_tenant_name_at_the_limit_is_accepted() -> None:
    assert client_headers(raw(("x-overspill-tenant", "t" * 128)))["x-overspill-tenant"] == "t" * 128
