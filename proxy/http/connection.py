"""What the server tells the app about a request's connection beyond ASGI: that the client's
connection was lost, the moment it is, and whether the request's body has all arrived.

Under plain ASGI an app hears that its client left only from `receive()`, so an app that must
notice while it waits keeps a task reading it, one per request (proxy/http/disconnect.py), and a
body whose arrival must be bounded in time is read under a timer, even when it came with its head
(most do). Both cost more than forwarding a small answer's bytes. uvicorn's protocol knows both
at no cost: `Facts` puts itself in each request's scope (`scope["extensions"]`), calls back when
the connection is lost and says whether a body is all in. Under another server the extension is
absent and the app falls back to plain ASGI.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, cast

from starlette.types import Scope
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

CONNECTION = "overspill.connection"  # the key in scope["extensions"]

Departure = Callable[[], object]


class Connection(Protocol):
    def body_arrived(self) -> bool:
        """The body of the request being read (the connection's oldest unanswered one) has all
        arrived: reading it will not wait."""
        ...

    def on_lost(self, departure: Departure) -> bool:
        """Call `departure` when the connection is lost; False, and no call, when it is lost
        already."""
        ...

    def forget(self, departure: Departure) -> None: ...


def connection_of(scope: Scope) -> Connection | None:
    extensions = scope.get("extensions")
    ours = extensions.get(CONNECTION) if extensions else None
    return cast(Connection, ours["connection"]) if ours else None


class Facts(HttpToolsProtocol):
    """uvicorn's HTTP protocol, a Connection to the requests it carries."""

    body_done = True  # the last request parsed has its whole body (none parsed: nothing owed)
    lost = False
    departures: set[Departure] | None = None

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.scope["extensions"] = {CONNECTION: {"connection": self}}  # ASGI: a dict each

    def on_headers_complete(self) -> None:
        self.body_done = False
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self.body_done = True
        super().on_message_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        departures, self.departures = self.departures, None
        super().connection_lost(exc)
        for departure in departures or ():
            departure()

    def body_arrived(self) -> bool:
        # Requests are parsed in order: when the last one parsed has its body, so has every
        # earlier one (a pipelined request behind the one being read only makes this False,
        # which costs a timer, never a wrong answer).
        return self.body_done

    def on_lost(self, departure: Departure) -> bool:
        if self.lost:
            return False
        if self.departures is None:
            self.departures = set()
        self.departures.add(departure)
        return True

    def forget(self, departure: Departure) -> None:
        if self.departures is not None:
            self.departures.discard(departure)
