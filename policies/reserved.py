"""Values that identify nobody by standard (pure): e-mail domains reserved for documentation
and tests (RFC 2606, RFC 6761), address blocks reserved for documentation (RFC 5737, RFC 3849),
and the card numbers the card networks and payment providers publish for testing (Stripe's,
Adyen's, Braintree's documentation: no card carries them). A request that shows one is not
carrying personal data; the detectors pass them by.
"""

from __future__ import annotations

import ipaddress

_DOMAINS = (b"example.com", b"example.net", b"example.org")
_TLDS = (b".test", b".example", b".invalid", b".localhost")
_NETWORKS = tuple(
    ipaddress.ip_network(net)
    for net in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32")
)
TEST_CARDS = frozenset(
    {"4242424242424242", "4000056655665556", "4111111111111111", "4012888888881881"}
    | {"4222222222222", "5555555555554444", "2223003122003222", "5200828282828210"}
    | {"5105105105105100", "378282246310005", "371449635398431", "378734493671000"}
    | {"6011111111111117", "6011000990139424", "3056930009020004", "36227206271667"}
    | {"30569309025904", "38520000023237", "3566002020360505", "3530111333300000"}
    | {"6200000000000005", "6011000400000000", "5454545454545454", "4000000000000002"}
)


def reserved_address(address: bytes) -> bool:
    """An e-mail address at a domain reserved for documentation or tests."""
    domain = address.rsplit(b"@", 1)[-1].lower()
    return domain.endswith(_TLDS) or any(
        domain == name or domain.endswith(b"." + name) for name in _DOMAINS
    )


def documentation_ip(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return any(address in net for net in _NETWORKS)


def test_card(digits: str) -> bool:
    return digits in TEST_CARDS
