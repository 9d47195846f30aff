"""API keys as the policy declares them: by the SHA-256 of the key, or by the name of the
environment variable that holds it, never in clear. Only digests are kept and compared."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

_HEX = re.compile(r"[0-9a-f]{64}")
_ENV = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
FORMS = '"sha256:<64 hex digits>" or "env:VARIABLE"'


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def declared_digest(spec: str, environ: Mapping[str, str]) -> str:
    """The digest a declaration stands for; ValueError saying what is wrong with it."""
    kind, _, value = spec.partition(":")
    if kind == "sha256":
        if not _HEX.fullmatch(value.lower()):
            raise ValueError(f"a sha256 key must be 64 hex digits, got {len(value)} characters")
        return value.lower()
    if kind == "env":
        if not _ENV.fullmatch(value):  # perhaps the key itself: not shown
            raise ValueError("what follows env: is not an environment variable name")
        key = environ.get(value, "").strip()  # a trailing newline is not part of a key
        if not key:
            raise ValueError(f"environment variable {value} is not set")
        return digest(key)
    # Perhaps a key pasted in clear: say what is expected, never echo it.
    raise ValueError(f"expected {FORMS}")


def bearer(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None
