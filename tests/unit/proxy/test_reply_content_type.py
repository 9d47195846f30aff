"""proxy/http/reply.py labels every answer itself (issue 30, finding 10): a whole answer is
application/json, a stream text/event-stream, whatever the upstream said (an upstream's
text/html would be served from the dashboard's origin)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from starlette.types import Message

from proxy.flow.caching import Head
from proxy.flow.record import Record
from proxy.flow.whole import Whole
from proxy.http.disconnect import DisconnectWatch
from proxy.http.reply import Reply


async def nothing() -> Message:
    raise AssertionError("the reply reads nothing")


async def stream() -> AsyncIterator[bytes]:
    yield b'data: {"choices": []}\n\n'
    yield b"data: [DONE]\n\n"


@pytest.mark.parametrize(
    ("streamed", "label"),
    [(False, b"application/json"), (True, b"text/event-stream")],
)
@pytest.mark.parametrize("upstreams", [[(b"content-type", b"text/html")], []])
async def test_the_content_type_is_the_proxys_own(
    streamed: bool, label: bytes, upstreams: list[tuple[bytes, bytes]]
) -> None:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    reply = Reply(send, DisconnectWatch(nothing), Record("r1"))
    head = Head("local/e", 200, [*upstreams, (b"x-overspill-redacted", b"0")], streamed)
    await reply.deliver(head, stream() if streamed else Whole(b'{"choices": []}'))
    headers = sent[0]["headers"]
    assert [value for name, value in headers if name == b"content-type"] == [label]
    assert (b"x-overspill-redacted", b"0") in headers  # the proxy's own headers stay
