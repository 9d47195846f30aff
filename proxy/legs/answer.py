"""What a target hands back, local engine or cloud: one Protocol, so the relay has no forks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol


class Answer(Protocol):
    stream: bool

    @property
    def status(self) -> int: ...

    def headers(self) -> list[tuple[bytes, bytes]]: ...

    async def read(self) -> bytes: ...

    def chunks(self) -> AsyncIterator[bytes]: ...

    def close(self) -> None: ...
