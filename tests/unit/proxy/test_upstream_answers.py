"""proxy/legs/upstream.py, what it accepts of an answer (issue 30, findings 4, 9 and 10): every
request asks for identity encoding; an answer in another encoding, or a whole answer that is no
JSON object, is refused unread (a 502 that is never relayed nor stored); the upstream's labels
never pass; an error's words go to the log, the operator's key masked. aiohttp's session.post
is replaced: no socket."""

from __future__ import annotations

import gzip
import logging
from dataclasses import dataclass, field

import orjson
import pytest
from multidict import CIMultiDict

from policies.model import Timeouts
from proxy.errors import UpstreamStatus, UpstreamUnreadable
from proxy.legs.upstream import Upstream

ANSWER = orjson.dumps({"id": "c1", "choices": [], "usage": {"prompt_tokens": 1}})
KEY = "sk-engine-key-24680"


@dataclass
class Response:
    """An engine's response as aiohttp hands it over (the parts Upstream reads)."""

    status: int
    body: bytes
    headers: CIMultiDict[str] = field(default_factory=CIMultiDict)
    closed: bool = False

    async def read(self) -> bytes:
        return self.body

    def close(self) -> None:
        self.closed = True


async def opened(response: Response, stream: bool = False) -> Upstream:
    upstream = Upstream(Timeouts())

    async def post(*args: object, **kwargs: object) -> Response:
        return response

    upstream.session.post = post  # type: ignore[method-assign,assignment]
    return upstream


async def refusal(response: Response, stream: bool = False) -> UpstreamUnreadable:
    upstream = await opened(response)
    try:
        with pytest.raises(UpstreamUnreadable) as caught:
            await upstream.open("e", "http://e.invalid/v1/chat/completions", b"{}", {}, stream)
    finally:
        await upstream.close()
    assert response.closed  # nothing more is read of it
    return caught.value


async def test_every_request_asks_for_the_bytes_as_they_are() -> None:
    upstream = Upstream(Timeouts())
    try:
        assert upstream.session.headers["Accept-Encoding"] == "identity"
    finally:
        await upstream.close()


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("coding", ["gzip", "br", "deflate", "gzip, identity"])
async def test_an_answer_compressed_all_the_same_is_refused_unread(
    coding: str, stream: bool
) -> None:
    headers = CIMultiDict({"content-encoding": coding, "content-type": "application/json"})
    error = await refusal(Response(200, gzip.compress(ANSWER), headers), stream)
    assert (error.status, error.code, error.retryable) == (502, "upstream_unreadable", False)
    assert coding not in error.message  # the upstream's words are for the log
    assert coding in error.detail


@pytest.mark.parametrize(
    "body",
    [gzip.compress(ANSWER), b"<html><script>alert(1)</script></html>", b"[1, 2]", ANSWER[:-3], b""],
    ids=["gzip unlabelled", "html", "not an object", "cut short", "empty"],
)
async def test_a_whole_answer_that_is_no_json_object_is_refused(body: bytes) -> None:
    error = await refusal(Response(200, body))
    assert (error.status, error.code) == (502, "upstream_unreadable")


async def test_a_json_answer_passes_and_none_of_the_upstreams_headers_with_it() -> None:
    headers = CIMultiDict({"content-type": "text/html", "set-cookie": "a=1", "retry-after": "9"})
    upstream = await opened(Response(200, ANSWER, headers))
    try:
        answer = await upstream.open("e", "http://e.invalid/v1/chat/completions", b"{}", {}, False)
    finally:
        await upstream.close()
    assert await answer.read() == ANSWER
    assert answer.headers() == []  # the proxy labels what it relays (proxy/http/reply.py)


async def test_an_engine_errors_words_go_to_the_log_with_the_key_masked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    said = f"CUDA out of memory at 10.0.0.7; your key {KEY} is fine"
    body = orjson.dumps({"error": {"message": said, "type": "InternalServerError"}})
    upstream = await opened(Response(500, body))
    headers = {"authorization": f"Bearer {KEY}", "x-request-id": "req-7"}
    try:
        with (
            caplog.at_level(logging.INFO, "overspill.upstream"),
            pytest.raises(UpstreamStatus) as caught,
        ):
            await upstream.open("e", "http://e.invalid/v1/x", b"{}", headers, False)
    finally:
        await upstream.close()
    shown = caught.value.render().decode()
    assert "CUDA" not in shown
    assert "10.0.0.7" not in shown
    assert "e answered 500 (request req-7): CUDA out of memory at 10.0.0.7" in caplog.text
    assert KEY not in caplog.text
    assert "…" + KEY[-4:] in caplog.text


async def test_a_key_at_the_logs_cut_is_masked_not_cut_in_two(
    caplog: pytest.LogCaptureFixture,
) -> None:
    body = orjson.dumps({"error": {"message": "x" * 490 + KEY}})
    upstream = await opened(Response(502, body))
    headers = {"authorization": f"Bearer {KEY}"}
    try:
        with caplog.at_level(logging.INFO, "overspill.upstream"), pytest.raises(UpstreamStatus):
            await upstream.open("e", "http://e.invalid/v1/x", b"{}", headers, False)
    finally:
        await upstream.close()
    assert KEY[:8] not in caplog.text
    assert "x" * 490 + "…" + KEY[-4:] in caplog.text
