"""The simulator's gzip fault (proxy/sim/compress.py, faults.py): which callers get gzip, and
that a compressed stream still arrives part by part, each readable as it comes."""

from __future__ import annotations

import zlib

import pytest
from starlette.types import Message, Receive, Scope, Send

from proxy.errors import BadRequest
from proxy.sim.compress import Compressing, accepts_gzip
from proxy.sim.faults import Faults, GzipWhen, merge_faults, parse_fault_flag

PARTS = [b'data: {"a": 1}\n\n', b'data: {"b": 2}\n\n', b"data: [DONE]\n\n"]


@pytest.mark.parametrize(
    ("header", "accepted"),
    [
        ("gzip, deflate", True),
        ("br;q=1.0, gzip;q=0.5", True),
        ("*", True),
        ("identity", False),
        ("", False),
        ("gzip;q=0", False),
        ("gzip;q=0.0, identity", False),
        ("deflate, br", False),
    ],
)
def test_which_callers_accept_gzip(header: str, accepted: bool) -> None:
    assert accepts_gzip(header) is accepted


async def streamed(
    when: GzipWhen, accept: bytes, path: str = "/v1/chat/completions"
) -> list[Message]:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(b"content-type", b"text/event-stream"), (b"content-length", b"99")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for index, part in enumerate(PARTS):
            await send({"type": "http.response.body", "body": part, "more_body": index < 2})

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        raise AssertionError("nothing is read")

    method = "GET" if path == "/v1/models" else "POST"
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "headers": [(b"accept-encoding", accept)],
    }
    await Compressing(app, lambda scope: when)(scope, receive, send)
    return sent


async def test_a_stream_is_compressed_part_by_part() -> None:
    sent = await streamed("accepted", b"gzip")
    headers = dict(sent[0]["headers"])
    assert headers[b"content-encoding"] == b"gzip"
    assert b"content-length" not in headers  # the compressed length is not known in advance
    unpacker = zlib.decompressobj(wbits=31)
    for part, message in zip(PARTS, sent[1:], strict=True):
        assert unpacker.decompress(message["body"]) == part  # readable as it comes
    assert unpacker.eof


@pytest.mark.parametrize(
    ("when", "accept", "path"),
    [
        ("accepted", b"identity", "/v1/chat/completions"),
        ("off", b"gzip", "/v1/chat/completions"),
        ("always", b"gzip", "/metrics"),  # probes and /_sim/ answer plain
        ("always", b"gzip", "/v1/models"),  # a GET: a probe's
    ],
)
async def test_what_is_left_plain(when: GzipWhen, accept: bytes, path: str) -> None:
    sent = await streamed(when, accept, path)
    assert b"content-encoding" not in dict(sent[0]["headers"])
    assert [m["body"] for m in sent[1:]] == PARTS


async def test_always_compresses_even_for_a_caller_that_asked_for_identity() -> None:
    sent = await streamed("always", b"identity")
    assert dict(sent[0]["headers"])[b"content-encoding"] == b"gzip"


def test_the_faults_take_gzip_and_error_text_from_a_flag_and_check_them() -> None:
    merged = merge_faults(Faults(), parse_fault_flag("gzip=always"))
    assert merged.gzip == "always"
    assert parse_fault_flag("error_text=org-1 key sk-9") == {"error_text": "org-1 key sk-9"}
    with pytest.raises(BadRequest):
        merge_faults(Faults(), {"gzip": True})
    with pytest.raises(BadRequest):
        merge_faults(Faults(), {"error_text": "x" * 1001})
