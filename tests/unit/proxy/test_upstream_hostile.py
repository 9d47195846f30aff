"""What a hostile engine or provider cannot pass to a client (issue 30, second review, item 7):
its Retry-After only as the proxy's own seconds on a 429 or 503; of its 4xx only a `code` and a
`type` the APIs' vocabulary has and a `param` naming a field of the body sent; a stream only if
it is an event stream in the identity encoding (every Content-Encoding header read), checked
before a byte is relayed. aiohttp's session.post is replaced: no socket."""

from __future__ import annotations

import asyncio
import gzip
import time
from dataclasses import dataclass, field
from email.utils import formatdate

import orjson
import pytest
from multidict import CIMultiDict

from policies.model import Timeouts
from proxy.errors import UpstreamStatus, UpstreamUnreadable
from proxy.legs.upstream import Upstream
from proxy.legs.wire_answer import WireAnswer
from proxy.upstream_said import retry_after_seconds
from tests.unit.proxy.test_wire_billing import WORST, Bill

SECRET = "sk-proj-SECRETKEY1234567890abcdef org-AbCdEf123 https://internal.acme.corp:8443/v1"
SSE = b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n'
SENT = orjson.dumps(
    {"model": "m", "messages": [{"role": "user", "content": "hello"}], "temperature": 0.7}
)


@dataclass
class Content:
    chunks: list[bytes]

    async def readany(self) -> bytes:
        await asyncio.sleep(0)
        return self.chunks.pop(0) if self.chunks else b""


@dataclass
class Response:
    """An upstream's response as aiohttp hands it over (the parts Upstream reads)."""

    status: int
    body: bytes
    headers: CIMultiDict[str] = field(default_factory=CIMultiDict)
    chunks: list[bytes] = field(default_factory=list)
    closed: bool = False

    @property
    def content(self) -> Content:
        return Content(self.chunks)

    async def read(self) -> bytes:
        return self.body

    def close(self) -> None:
        self.closed = True


def headers(*pairs: tuple[str, str]) -> CIMultiDict[str]:
    return CIMultiDict(pairs)


async def opened(response: Response, stream: bool, sent: bytes = SENT) -> tuple[Upstream, object]:
    upstream = Upstream(Timeouts())

    async def post(*args: object, **kwargs: object) -> Response:
        return response

    upstream.session.post = post  # type: ignore[method-assign,assignment]
    try:
        answer = await upstream.open("e", "http://e.invalid/v1/chat/completions", sent, {}, stream)
    except Exception as error:
        await upstream.close()
        return upstream, error
    return upstream, answer


async def stream_of(response: Response) -> bytes | Exception:
    """The relayed body of a streamed answer, or the error that refused it."""
    upstream, answer = await opened(response, stream=True)
    try:
        if isinstance(answer, Exception):
            return answer
        got = b""
        try:
            async for chunk in answer.chunks():  # type: ignore[attr-defined]
                got += chunk
        except UpstreamUnreadable as error:
            assert got == b""  # refused before a byte was relayed
            return error
        return got
    finally:
        await upstream.close()


# Retry-After: the proxy's own number, on a 429 or a 503 only


@pytest.mark.parametrize(
    ("status", "raw", "kept"),
    [
        (429, "7; sk-proj-SECRET", None),
        (429, "7", "7"),
        (429, " 7 ", "7"),
        (503, "2", "2"),
        (429, "1.5", "1.5"),
        (429, "99999999", "86400"),
        (429, "soon", None),
        (429, "", None),
        (400, "7", None),
        (500, "7", None),
        (404, "7", None),
    ],
)
def test_an_upstreams_retry_after_is_the_proxys_number_or_nothing(
    status: int, raw: str, kept: str | None
) -> None:
    error = UpstreamStatus("e", status, None, {"retry-after": raw})
    assert error.headers == ({"Retry-After": kept} if kept else {})


def test_an_http_date_becomes_seconds_from_now_at_most_a_day() -> None:
    now = time.time()
    assert retry_after_seconds(formatdate(now + 30, usegmt=True), now) in (29, 30, 31)
    assert retry_after_seconds(formatdate(now - 30, usegmt=True), now) == 0
    assert retry_after_seconds(formatdate(now + 10**7, usegmt=True), now) == 86_400
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 sk-proj-SECRET", now) is None


async def test_a_retry_after_with_words_in_it_never_reaches_the_client() -> None:
    said = orjson.dumps({"error": {"message": SECRET, "code": "rate_limit_exceeded"}})
    response = Response(429, said, headers(("Retry-After", "7; sk-proj-SECRET")))
    _, error = await opened(response, stream=False)
    assert isinstance(error, UpstreamStatus)
    assert error.headers == {}
    response = Response(429, said, headers(("Retry-After", "7")))
    _, error = await opened(response, stream=True)
    assert isinstance(error, UpstreamStatus)
    assert error.headers == {"Retry-After": "7"}


# code, type, param: the APIs' vocabulary and the caller's own fields


def shown(body: dict[str, object], sent: bytes = SENT, status: int = 400) -> dict[str, object]:
    error = UpstreamStatus("e", status, orjson.dumps({"error": body}), {}, sent)
    rendered: dict[str, object] = orjson.loads(error.render())["error"]
    assert SECRET not in error.render().decode()
    return rendered


@pytest.mark.parametrize(
    "word",
    [
        "internal.db.acme.corp",
        "sk_live_hunter",
        "AcmeCorpInternalSecretOrg",
        "password.hunter.two",
        "x",
    ],
)
def test_a_code_or_type_outside_the_apis_vocabulary_is_not_shown(word: str) -> None:
    error = shown({"message": SECRET, "type": word, "code": word, "param": word})
    assert error == {
        "message": "e answered 400",
        "type": "upstream_error",
        "param": None,
        "code": "upstream_error",
    }


@pytest.mark.parametrize(
    ("kind", "code"),
    [
        ("invalid_request_error", "context_length_exceeded"),
        ("invalid_request_error", "model_not_found"),
        ("rate_limit_error", "rate_limit_exceeded"),
        ("insufficient_quota", "insufficient_quota"),
        ("authentication_error", "invalid_api_key"),
        ("BadRequestError", 400),  # vLLM's
        ("not_found_error", None),  # Anthropic's, Ollama's
    ],
)
def test_the_apis_own_codes_and_types_are_shown(kind: str, code: object) -> None:
    error = shown({"message": SECRET, "type": kind, "code": code})
    assert error["type"] == kind
    assert error["code"] == (str(code) if code is not None else "upstream_error")


@pytest.mark.parametrize(
    ("param", "kept"),
    [
        ("temperature", True),
        ("messages", True),
        ("messages[0].content", True),
        ("messages.0.content", True),  # pydantic's spelling (vLLM)
        ("messages[3].content", False),
        ("messages[0].secret", False),
        ("max_tokens", False),  # not in the body sent
        ("internal.db.acme.corp", False),
        ("sk_live_hunter", False),
        (".temperature", False),
        ("temperature; drop", False),
    ],
)
def test_a_param_is_shown_only_when_it_names_a_field_of_the_body_sent(
    param: str, kept: bool
) -> None:
    error = shown({"message": SECRET, "type": "invalid_request_error", "param": param})
    assert error["param"] == (param if kept else None)


async def test_the_engines_param_is_checked_against_the_body_it_was_sent() -> None:
    said = {"message": SECRET, "type": "invalid_request_error", "code": "invalid_value"}
    for param, kept in (("temperature", "temperature"), ("internal.db.acme.corp", None)):
        body = orjson.dumps({"error": {**said, "param": param}})
        _, error = await opened(Response(400, body), stream=False)
        assert isinstance(error, UpstreamStatus)
        assert (error.param, error.code, error.type) == (
            kept,
            "invalid_value",
            "invalid_request_error",
        )


# streams: an event stream in the identity encoding, or a 502 before a byte goes


EVENTS = headers(("Content-Type", "text/event-stream"))


@pytest.mark.parametrize(
    "response",
    [
        Response(200, b"", headers(("Content-Type", "text/html")), [b"<html><script>"]),
        Response(200, b"", headers(), [SSE]),  # no type at all
        Response(200, b"", headers(("Content-Type", "application/json")), [SSE]),
        Response(
            200,
            b"",
            headers(
                ("Content-Type", "text/event-stream"),
                ("Content-Encoding", "identity"),
                ("Content-Encoding", "gzip"),
            ),
            [gzip.compress(SSE)],
        ),
        Response(
            200,
            b"",
            headers(("Content-Type", "text/event-stream"), ("Content-Encoding", "identity, gzip")),
            [gzip.compress(SSE)],
        ),
        Response(200, b"", EVENTS, [b"<html><script>alert(1)</script></html>"]),
        Response(200, b"", EVENTS, [gzip.compress(SSE)]),
        Response(200, b"", EVENTS, [b"da", b"ta"]),  # ends before it tells
        Response(200, b"", EVENTS, [b"\n" * 5000]),
    ],
    ids=[
        "html",
        "untyped",
        "json",
        "gzip under a second header",
        "gzip in a list",
        "html labelled events",
        "gzip unlabelled",
        "cut short",
        "blank lines only",
    ],
)
async def test_a_stream_that_is_not_events_in_identity_is_refused_unrelayed(
    response: Response,
) -> None:
    got = await stream_of(response)
    assert isinstance(got, UpstreamUnreadable)
    assert (got.status, got.code) == (502, "upstream_unreadable")
    assert response.closed


@pytest.mark.parametrize(
    ("response", "body"),
    [
        (Response(200, b"", EVENTS, [SSE]), SSE),
        (Response(200, b"", EVENTS, [SSE[:1], SSE[1:3], SSE[3:]]), SSE),
        (Response(200, b"", EVENTS, [b": keepalive\n\n", SSE]), b": keepalive\n\n" + SSE),
        (Response(200, b"", EVENTS, [b"\xef\xbb", b"\xbf\r\n" + SSE]), b"\xef\xbb\xbf\r\n" + SSE),
        (Response(200, b"", EVENTS, [b"event: x\n" + SSE]), b"event: x\n" + SSE),
        (
            Response(
                200,
                b"",
                headers(
                    ("Content-Type", "Text/Event-Stream; charset=utf-8"),
                    ("Content-Encoding", " Identity "),
                ),
                [SSE],
            ),
            SSE,
        ),
        (Response(200, b"", EVENTS, []), b""),  # nothing at all: as before
    ],
    ids=["whole", "cut small", "comment first", "bom", "event field", "labels spelt", "empty"],
)
async def test_an_event_stream_passes_whole_however_it_is_cut(
    response: Response, body: bytes
) -> None:
    assert await stream_of(response) == body


async def test_a_cloud_stream_that_is_not_events_is_billed_the_most() -> None:
    response = Response(200, b"", EVENTS, [b"<html>", b"</html>"])
    upstream, answer = await opened(response, stream=True)
    bill = Bill()
    wire = WireAnswer(answer, bill.of(), stream=True)  # type: ignore[arg-type]
    try:
        with pytest.raises(UpstreamUnreadable):
            async for _ in wire.chunks():
                pass
    finally:
        await upstream.close()
    assert bill.usd == [WORST]
