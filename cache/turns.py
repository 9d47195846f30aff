"""Work waiting for one worker, in turns by scope (the verifier's readings, cache/verifier.py):
the scopes take turns, round robin, and a scope's own items go first come, first served. One
scope's flood then delays another scope's item by at most one item per other busy scope, not by
the whole flood; and a scope holds a bounded number waiting, so a flood costs memory in
proportion to the scopes, not to the requests. Each step O(1); withdrawing an item O(bound).
Used from one event loop: no lock.
"""

from __future__ import annotations

from collections import deque
from typing import Generic, TypeVar

T = TypeVar("T")


class Turns(Generic[T]):
    def __init__(self, per_scope: int) -> None:
        self.per_scope = per_scope
        self._queues: dict[str, deque[T]] = {}  # a scope is here while it has a turn
        self._turns: deque[str] = deque()  # the scopes with a turn, the next one first

    def add(self, scope: str, item: T) -> bool:
        """False: the scope has as many waiting as it may, and `item` is not queued."""
        queue = self._queues.get(scope)
        if queue is None:
            queue = self._queues[scope] = deque()
            self._turns.append(scope)
        elif len(queue) >= self.per_scope:
            return False
        queue.append(item)
        return True

    def next(self) -> T | None:
        """The first item of the scope whose turn it is (that scope goes last), if any."""
        while self._turns:
            scope = self._turns.popleft()
            queue = self._queues[scope]
            if queue:
                item = queue.popleft()
                if queue:
                    self._turns.append(scope)
                else:
                    del self._queues[scope]
                return item
            del self._queues[scope]  # emptied by withdrawals: its turn lapses
        return None

    def withdraw(self, scope: str, item: T) -> None:
        """An item no longer wanted leaves its queue (if it still waits there)."""
        queue = self._queues.get(scope)
        if queue is not None and item in queue:
            queue.remove(item)
