"""What happened to one request: noted by the request path as it goes, read once it is over by
the access log, the metrics and the dashboard (proxy/ops/observe.py).

One Record per request, made by the access middleware and kept in the request's scope state
(under RECORD), so every step reads and writes typed fields, never a dict of strings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from policies.privacy import Classification
    from proxy.flow.caching import Head
    from proxy.flow.usage import Usage

RECORD = "record"  # its key in the ASGI scope's state


@dataclass
class Record:
    request_id: str
    tenant: str = ""  # as the request named it
    model: str = ""  # as the request asked for it
    served_model: str = ""  # set only for a model the proxy serves (bounded metric labels)
    priority: str = ""
    privacy: str = ""
    privacy_because: tuple[str, ...] = ()  # what set the level: sources, detectors and fields
    reasons: tuple[str, ...] = field(default_factory=tuple)
    route: str = ""  # local/NAME, cloud/NAME, cache
    cache: str = ""  # the cache's verdict, with why
    cache_status: str = ""  # X-Overspill-Cache: the verdict alone
    tokens_in: int | None = None
    tokens_out: int | None = None
    queued_s: float | None = None  # time in the waiting room
    degraded: str = ""  # what was given up under pressure
    error: str = ""  # the error code the client got
    prompt: str | None = None  # kept only when the policy logs prompts (observe.py decides)

    def note(self, reasons: tuple[str, ...], privacy: str, because: tuple[str, ...] = ()) -> None:
        """Why the request goes where it goes, and what set its privacy level (never a value
        that a detector found): for the headers and the access log."""
        self.reasons, self.privacy, self.privacy_because = reasons, privacy, because

    def note_raised(self, raised: Classification | None) -> None:
        """The names model, reading what would leave, found the request stricter than its
        level said (proxy/flow/legs.py)."""
        if raised is not None:
            self.privacy = raised.level
            self.privacy_because = (*self.privacy_because, *raised.reasons)

    def note_request(self, tenant: str, model: str) -> None:
        self.tenant, self.model = tenant, model

    def note_served(self, model: str) -> None:
        """The model is one the proxy serves (a route or a backend has it)."""
        self.served_model = model

    def note_usage(self, usage: Usage | None) -> None:
        """The tokens an engine or the cloud processed for this request (not a cache hit)."""
        if usage is not None:
            self.tokens_in, self.tokens_out = usage.prompt, usage.completion

    def note_priority(self, priority: str) -> None:
        self.priority = priority

    def note_production(self, head: Head) -> None:
        """How the answer was produced (waited, degraded): the same for every client sharing
        it, so each notes it from the answer's head."""
        self.queued_s, self.degraded = head.queued_s, head.degraded

    def note_cache(self, status: str, why: str) -> None:
        self.cache_status = status
        self.cache = f"{status}: {why}" if why else status


def record_of(scope_state: dict[str, Any]) -> Record:
    """The request's record (one made on the spot for a scope the middleware never saw)."""
    found = scope_state.get(RECORD)
    if not isinstance(found, Record):
        found = scope_state[RECORD] = Record(str(scope_state.get("request_id", "")))
    return found


def question_of(body: dict[str, object]) -> str:
    """The question, for a log line: the last user message (or the prompt), at most 2,000
    characters."""
    messages = body.get("messages")
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") == "user":
                return str(message.get("content"))[:2000]
    return str(body.get("prompt", ""))[:2000]
