"""A detector of credentials in request text (pure): cloud access keys, private keys, access
tokens, JWTs, passwords in connection strings, and a credential written as a label and a value
in any of some forty languages (policies/credentials.py).

The shapes are those the well-kept scanners look for (detect-secrets' plugins, gitleaks' rules):
a provider's fixed prefix and alphabet where it has one (AWS key ids, GitHub, Slack, Stripe,
OpenAI tokens), a structure otherwise (a PEM private key with a body, a JWT's three base64url
parts, `scheme://user:password@host`, `Password=...;`, an Azure `AccountKey=`), and for a value
assigned to a name that says secret, a value that looks like one. They run on RE2, so the scan
stays linear in the text like the other detectors (a scanner on a backtracking engine can be
made to take quadratic time by a request). Placeholders are not secrets: `sk-your-key-here`,
`<password>`, `${DB_PASSWORD}`, `****`, `sk_live_...4242` (the values documentation shows).
"""

from __future__ import annotations

from collections.abc import Iterator

import re2  # type: ignore[import-untyped]

from policies.credentials import credentials
from policies.re2text import spans

_TOKENS = re2.compile(
    r"(?:^|[^A-Za-z0-9_])("
    r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}"  # AWS access key id
    r"|gh[pousr]_[A-Za-z0-9]{36}"  # GitHub classic tokens
    r"|github_pat_[A-Za-z0-9_]{60,}"  # GitHub fine-grained tokens
    r"|xox[abeoprs]-[A-Za-z0-9-]{20,}"  # Slack
    r"|(?:sk|rk)_live_[A-Za-z0-9]{20,}"  # Stripe live keys
    r"|sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{32,}"  # OpenAI-style keys
    r"|AIza[A-Za-z0-9_-]{35}"  # Google API keys
    r"|eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{16,}"  # JWT
    r")"
)
# A PEM private key with a body (a header alone, as in documentation, is not a key). Its line
# breaks may be real or "\n" escapes (a key inside a JSON string).
_PRIVATE_KEY = re2.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:\s|\\n)*[A-Za-z0-9+/=]{40}"
)
_AWS_SECRET = re2.compile(
    r"(?i)aws_?secret(?:_?access)?_?key[\"']?\s*[:=]\s*[\"']?([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+]|$)"
)
_AZURE_KEY = re2.compile(r"(?i)(?:AccountKey|SharedAccessKey)=([A-Za-z0-9+/]{40,}={0,2})")
# scheme://user:password@host
_URL_PASSWORD = re2.compile(r"[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s:/@]{1,64}:([^\s:/@]{1,128})@\w")
# Password=...; in ADO.NET, ODBC and JDBC strings
_KEY_VALUE_PASSWORD = re2.compile(r"(?i)(?:^|[;\s\"'?&])(?:password|pwd)\s*=\s*([^;&\"'\s]{1,128})")
# a quoted value assigned to a name that says secret
_ASSIGNED = re2.compile(
    r"(?i)(?:api[_-]?key|secret(?:[_-]?key)?|access[_-]?token|auth[_-]?token|password|passwd)"
    r"[\"']?\s*[:=]\s*[\"']([^\"'\s]{8,128})[\"']"
)
_PLACEHOLDER_WORDS = ("password", "passwd", "secret", "changeme", "example", "your", "xxx", "...")


def placeholder(value: str) -> bool:
    """A value documentation shows in place of a secret, or a reference to one."""
    lowered = value.lower()
    return (
        value[:1] in "<${%*[("
        or "(" in value  # a call: password = get_password()
        or len(set(value)) <= 2
        or any(word in lowered for word in _PLACEHOLDER_WORDS)
        or not any(c.isdigit() or not c.isalnum() for c in value)  # a plain word
    )


def _looks_random(value: str) -> bool:
    """Letters and digits mixed, as a generated key is; a word or a counter is not."""
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def secrets(data: bytes) -> Iterator[tuple[int, int]]:
    """Where credentials are in `data` (UTF-8)."""
    for start, end in spans(_TOKENS, data):
        token = data[start:end].decode()
        if _looks_random(token) and not placeholder(token):
            yield start, end
    yield from spans(_PRIVATE_KEY, data)
    for pattern in (_AWS_SECRET, _AZURE_KEY):
        yield from (s for s in spans(pattern, data) if _looks_random(_text(data, s)))
    for pattern in (_URL_PASSWORD, _KEY_VALUE_PASSWORD, _ASSIGNED):
        yield from (s for s in spans(pattern, data) if not placeholder(_text(data, s)))
    yield from credentials(data)


def _text(data: bytes, span: tuple[int, int]) -> str:
    return data[span[0] : span[1]].decode("utf-8", "replace")
