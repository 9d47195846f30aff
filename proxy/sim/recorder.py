"""What reached the simulator: the cloud personality's proof of what left the building."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

# Headers worth keeping for tests; credentials are reduced to a fingerprint.
_KEPT_HEADERS = ("x-request-id", "x-overspill-privacy", "user-agent", "content-type")


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
        auth = headers.get("authorization")
        if auth:
            kept["authorization"] = "…" + auth[-4:]
        self.entries.append({"at": at, "path": path, "headers": kept, "body": body})

    def snapshot(self) -> dict[str, Any]:
        return {"count": len(self.entries), "dropped": self.dropped, "requests": list(self.entries)}

    def clear(self) -> None:
        self.entries.clear()
        self.dropped = 0
