"""Hot reload: watch the policy file, validate, swap atomically, keep the last good policy.

A change is noticed by polling the file's content (mtime, size and a hash: editors that write in
place and those that rename both show up), on SIGHUP, or on POST /admin/reload. A new policy that
fails validation is rejected, reported (log, /admin/status, metric) and the running one stays.
In-flight requests keep the policy they started with: `apply` builds new objects, it never edits
the ones requests hold.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from policies.loader import PolicyError, load_policy
from policies.model import Policy

log = logging.getLogger("overspill.policy")


@dataclass(frozen=True)
class ReloadResult:
    ok: bool
    trigger: str  # "file change", "SIGHUP", "admin"
    at: float  # wall-clock time
    problems: tuple[str, ...] = ()


@dataclass
class PolicyWatcher:
    path: Path
    apply: Callable[[Policy], None]
    poll_s: float = 0.25
    last: ReloadResult | None = None
    counts: dict[str, int] = field(default_factory=lambda: {"ok": 0, "rejected": 0})
    _fingerprint: bytes = b""

    def __post_init__(self) -> None:
        self._fingerprint = self._read_fingerprint()

    def reload(self, trigger: str) -> ReloadResult:
        self._fingerprint = self._read_fingerprint()
        try:
            policy = load_policy(self.path)
        except PolicyError as error:
            result = ReloadResult(False, trigger, time.time(), tuple(error.report().splitlines()))
            log.error(
                "policy reload (%s) rejected, keeping the last good policy:\n%s",
                trigger,
                error.report(),
            )
            self.counts["rejected"] += 1
        else:
            self.apply(policy)
            result = ReloadResult(True, trigger, time.time())
            log.info("policy reloaded (%s) from %s", trigger, self.path)
            self.counts["ok"] += 1
        self.last = result
        return result

    async def watch(self) -> None:
        while True:
            await asyncio.sleep(self.poll_s)
            if self._read_fingerprint() != self._fingerprint:
                self.reload("file change")

    def _read_fingerprint(self) -> bytes:
        try:
            return hashlib.blake2b(self.path.read_bytes(), digest_size=16).digest()
        except OSError:
            return b"missing"
