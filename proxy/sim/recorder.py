"""What reached the simulator: the cloud personality's proof of what left the building."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

# Headers worth keeping for tests; credentials (OpenAI's bearer token, Anthropic's x-api-key)
# are reduced to a fingerprint.
_KEPT_HEADERS = (
    "x-request-id",
    "x-overspill-privacy",
    "user-agent",
    "content-type",
    "accept-encoding",  # a relay of raw bytes must ask for identity
    "anthropic-version",
    "anthropic-beta",
)
_CREDENTIALS = ("authorization", "x-api-key")


@dataclass
class RequestLog:
    limit: int = 100_000
    entries: deque[dict[str, Any]] = field(default_factory=deque)
    dropped: int = 0

    def record(self, at: float, path: str, headers: dict[str, str], body: Any) -> None:
        if len(self.entries) >= self.limit:
            self.entries.popleft()
            self.dropped += 1
        kept = {name: headers[name] for name in _KEPT_HEADERS if name in headers}
        for name in _CREDENTIALS:
            if headers.get(name):
                kept[name] = "…" + headers[name][-4:]
        self.entries.append({"at": at, "path": path, "headers": kept, "body": body})

    def snapshot(self) -> dict[str, Any]:
        return {"count": len(self.entries), "dropped": self.dropped, "requests": list(self.entries)}

    def clear(self) -> None:
        self.entries.clear()
        self.dropped = 0
