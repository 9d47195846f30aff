"""What identifies nobody by standard is not personal data: reserved e-mail domains, the
documentation address blocks, the card numbers published for testing. Their neighbours are."""

from __future__ import annotations

import pytest

from policies.pii import DETECTORS, scan


def fired(text: str) -> list[str]:
    return scan([text], DETECTORS).fired


@pytest.mark.parametrize(
    "text",
    [
        "write to support@example.com",
        "cc press@news.example.org and sales@example.net",
        "the fixture uses alice@corp.test and bob@host.invalid",
        "ssh to 192.0.2.10, then 198.51.100.7 and 203.0.113.200",
        "listen on [2001:db8::1]:443",
        "Stripe test card 4242 4242 4242 4242, exp 12/34",
        "use 4111-1111-1111-1111 in the sandbox",
        "amex test number 378282246310005",
    ],
)
def test_reserved_and_published_test_values_identify_nobody(text: str) -> None:
    assert fired(text) == []


@pytest.mark.parametrize(
    ("text", "detector"),
    [
        ("write to support@example.co", "email"),
        ("write to jane@myexample.com", "email"),
        ("ssh to 192.0.3.10", "ip_address"),
        ("listen on [2001:db9::1]:443", "ip_address"),
        ("card 4539 1488 0343 6467", "payment_card"),
    ],
)
def test_their_neighbours_are_personal_data(text: str, detector: str) -> None:
    assert fired(text) == [detector]
