"""What a hostile client can grow, hold or probe, through the real proxy: names are bounded before
any bookkeeping, bodies arrive in bounded time and depth, repeated headers resolve to the
strictest value or a 400, connections are capped, and one tenant's traffic leaves no trace in
another tenant's headers. Real processes: simulators behind the proxy, httpx and raw sockets."""

from __future__ import annotations

import contextlib
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.processes import FAST_ENGINE, Process, backend_toml, proxy, sim

TENANTS = '[[tenants]]\nname = "acme"\n[[tenants]]\nname = "globex"\n'


def config(engine: str, extra: str = "", body_timeout_s: float = 30) -> str:
    """`extra`: more [server] keys. The semantic layer is off: loading its model is a one-time
    cost that would hide what these tests measure."""
    return (
        f"[server]\nprobe_interval_s = 0.2\nbody_timeout_s = {body_timeout_s}\n{extra}\n"
        f"[cache]\nsemantic = false\n{backend_toml('local', 'vllm', engine)}"
        f"{TENANTS}"
    )


@pytest.fixture(scope="module")
def stack() -> Iterator[tuple[Process, Process]]:
    with sim(*FAST_ENGINE, "--model", "sim-model") as engine, proxy(config(engine.url)) as p:
        yield p, engine


def chat(url: str, headers: dict[str, str] | None = None, **extra: object) -> httpx.Response:
    body = {
        "model": "sim-model",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 3,
        **extra,
    }
    return httpx.post(url + "/v1/chat/completions", json=body, headers=headers or {}, timeout=30)


def openai_error(response: httpx.Response) -> dict[str, object]:
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return dict(error)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


# --- names ----------------------------------------------------------------------------------


def test_a_long_model_name_is_refused_before_any_bookkeeping(
    stack: tuple[Process, Process],
) -> None:
    p, _ = stack
    before = rss_kib(p.popen.pid)
    for n in range(40):
        response = chat(p.url, model=f"{n}-" + "m" * 3_000_000)
        assert response.status_code == 400
        assert openai_error(response)["param"] == "model"
    for n in range(300):  # short unknown names: 404, and counted under "other" only
        assert chat(p.url, model=f"no-such-model-{n}").status_code == 404
    traffic = httpx.get(p.url + "/admin/traffic").json()
    models = {m for bucket in traffic["buckets"] for m in bucket["models"]}
    assert models <= {"other", "sim-model"}
    assert len(httpx.get(p.url + "/admin/traffic").content) < 200_000
    # 120 MB of names went in; what stays is bounded (allocator slack, not the names)
    assert rss_kib(p.popen.pid) - before < 64 * 1024


def test_a_long_or_repeated_tenant_header_is_a_400(stack: tuple[Process, Process]) -> None:
    p, _ = stack
    long = chat(p.url, {"x-overspill-tenant": "t" * 129})
    assert long.status_code == 400
    assert openai_error(long)["code"] == "invalid_tenant"
    body = {"model": "sim-model", "messages": [{"role": "user", "content": "x"}]}
    url = p.url + "/v1/chat/completions"
    tenants = [("x-overspill-tenant", "acme"), ("x-overspill-tenant", "globex")]
    twice = httpx.post(url, timeout=30, headers=tenants, json=body)
    assert twice.status_code == 400
    assert openai_error(twice)["code"] == "duplicate_header"
    keys = [("authorization", "Bearer a"), ("authorization", "Bearer b")]
    assert httpx.post(url, timeout=30, headers=keys, json=body).status_code == 400


def test_invented_tenant_names_leave_no_trace(stack: tuple[Process, Process]) -> None:
    """Names no policy declares get no bookkeeping of their own: not a cache scope, not a
    bucket, not a metric label, not a dashboard line (bench.abuse measures memory over
    10,000 of them)."""
    p, _ = stack
    with httpx.Client(timeout=30) as client:
        for n in range(300):
            body = {
                "model": "sim-model",
                "temperature": 0,
                "max_tokens": 2,
                "messages": [{"role": "user", "content": f"question {n}"}],
            }
            headers = {"x-overspill-tenant": f"invented-{n}-{uuid.uuid4().hex}"}
            response = client.post(p.url + "/v1/chat/completions", json=body, headers=headers)
            assert response.status_code == 200
        status = client.get(p.url + "/admin/status").json()
        assert [t["name"] for t in status["tenants"]] == ["acme", "globex"]
        for page in ("/metrics", "/admin/status"):
            assert "invented-" not in client.get(p.url + page).text, page
        traffic = client.get(p.url + "/admin/traffic").json()
        assert len(traffic["decisions"]) <= 50  # the last decisions only, whoever sent them


# --- bodies ---------------------------------------------------------------------------------


def test_a_deeply_nested_body_is_a_400(stack: tuple[Process, Process]) -> None:
    p, _ = stack
    for depth in (65, 1000, 1023):
        nested = "[" * depth + "]" * depth
        raw = (
            '{"model": "sim-model", "messages": [{"role": "user", "content": "x"}], "x": '
            + nested
            + "}"
        )
        response = httpx.post(
            p.url + "/v1/chat/completions",
            content=raw,
            timeout=30,
            headers={"content-type": "application/json"},
        )
        assert response.status_code == 400, response.text
        assert "nested" in str(openai_error(response)["message"]) or depth > 1000


def _one_byte_of_500(url: str) -> socket.socket:
    """A connection that sent a request's head and the first byte of its 500-byte body."""
    host, port = url.removeprefix("http://").split(":")
    conn = socket.create_connection((host, int(port)), timeout=60)
    head = b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 500\r\n"
    conn.sendall(head + b"content-type: application/json\r\n\r\n{")
    return conn


def test_a_trickled_body_gets_a_408() -> None:
    with (
        sim(*FAST_ENGINE, "--model", "sim-model") as engine,
        proxy(config(engine.url, body_timeout_s=1)) as p,
    ):
        with _one_byte_of_500(p.url) as conn:
            answer = b""
            while b'"request_timeout"' not in answer:  # the test's timeout is the backstop
                more = conn.recv(65536)
                if not more:
                    break
                answer += more
        assert answer.startswith(b"HTTP/1.1 408")
        assert b'"request_timeout"' in answer


def test_a_client_that_leaves_mid_body_is_noted_as_gone_without_a_traceback() -> None:
    with (
        sim(*FAST_ENGINE, "--model", "sim-model") as engine,
        proxy(config(engine.url, body_timeout_s=60)) as p,
    ):
        _one_byte_of_500(p.url).close()
        _wait_for(lambda: _decisions(p.url) != [])
        [decision] = _decisions(p.url)
        assert decision["error"] == "client_disconnected"
        assert chat(p.url).status_code == 200
        assert not [line for line in p.output if "Traceback" in line or "unexpected" in line]


def _decisions(url: str) -> list[dict[str, object]]:
    decisions: list[dict[str, object]] = httpx.get(url + "/admin/traffic").json()["decisions"]
    return decisions


def test_a_busy_keep_alive_connection_outlives_the_head_deadline() -> None:
    """Heads that each come in time keep a connection open past header_timeout_s: the deadline
    bounds each head's wait, not the connection's life. Each head comes a quarter of the
    deadline after the last answer, so the connection is waiting for one whenever a deadline
    set earlier falls due."""
    extra = "header_timeout_s = 2"
    with (
        sim(*FAST_ENGINE, "--model", "sim-model") as engine,
        proxy(config(engine.url, extra)) as p,
        httpx.Client(base_url=p.url, limits=httpx.Limits(max_connections=1)) as client,
    ):
        body = {"model": "sim-model", "messages": [{"role": "user", "content": "hi"}]}
        ports = set()
        until = time.monotonic() + 2 * 2  # two deadlines' worth
        while time.monotonic() < until:
            response = client.post("/v1/chat/completions", json={**body, "max_tokens": 1})
            assert response.status_code == 200
            ports.add(_local_port(response))
            time.sleep(0.5)
        assert len(ports) == 1  # one connection served them all


def _local_port(response: httpx.Response) -> int:
    stream = response.extensions["network_stream"]
    return int(stream.get_extra_info("socket").getsockname()[1])


def test_connections_beyond_the_limit_are_turned_away_and_come_back() -> None:
    with (
        sim(*FAST_ENGINE, "--model", "sim-model") as engine,
        proxy(config(engine.url, "max_connections = 4", body_timeout_s=60)) as p,
    ):
        host, port = p.url.removeprefix("http://").split(":")
        held = []
        for _ in range(4):  # requests whose bodies never finish: each holds its connection
            conn = socket.create_connection((host, int(port)), timeout=60)
            conn.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n{"
            )
            held.append(conn)
        _wait_for(lambda: chat(p.url).status_code == 503)
        for conn in held:
            conn.close()
        _wait_for(lambda: chat(p.url).status_code == 200)


def test_silent_or_trickling_connections_are_closed_and_free_their_slots() -> None:
    """Connections that send nothing, or only part of a request's head, are closed once the
    head is late: the slots they held serve other clients again."""
    extra = "max_connections = 4\nheader_timeout_s = 1"
    with (
        sim(*FAST_ENGINE, "--model", "sim-model") as engine,
        proxy(config(engine.url, extra, body_timeout_s=60)) as p,
    ):
        host, port = p.url.removeprefix("http://").split(":")
        silent = [socket.create_connection((host, int(port)), timeout=60) for _ in range(2)]
        trickling = [socket.create_connection((host, int(port)), timeout=60) for _ in range(2)]
        for conn in trickling:
            conn.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n")
        for conn in [*silent, *trickling]:
            while True:  # until the proxy closes it; the socket's timeout is the backstop
                try:
                    if conn.recv(65536) == b"":
                        break
                except ConnectionResetError:
                    break
            conn.close()
        _wait_for(lambda: chat(p.url).status_code == 200)


@pytest.mark.parametrize(
    "head",
    [
        b"GET /healthz HTTP/1.1\r\nhost: x\r\ncontent-length: 999999999\r\n\r\n",
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 999999\r\n\r\n{",
    ],
    ids=["answered, body unread", "408"],
)
def test_a_connection_that_trickles_after_its_answer_is_closed(head: bytes) -> None:
    """A request is answered (200, or 408 for a body that never came), and the connection then
    trickles bytes that never make a new head: it is closed, its slot freed."""
    extra = "max_connections = 4\nheader_timeout_s = 1"
    with (
        sim(*FAST_ENGINE, "--model", "sim-model") as engine,
        proxy(config(engine.url, extra, body_timeout_s=1)) as p,
    ):
        host, port = p.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=60) as conn:
            conn.sendall(head)
            answer = conn.recv(65536)
            assert answer.startswith((b"HTTP/1.1 200", b"HTTP/1.1 408"))
            conn.settimeout(0.2)
            closed = False
            while not closed:  # one byte at a time, until the proxy closes; pytest's timeout
                try:  # is the backstop
                    conn.sendall(b"x")
                    closed = conn.recv(65536) == b""
                except TimeoutError:
                    continue
                except OSError:  # reset or broken pipe: closed too
                    closed = True
        assert chat(p.url).status_code == 200


def _wait_for(condition: Callable[[], bool]) -> None:
    """Wait for an event the test cannot be told of; the test's timeout is the backstop."""
    while not condition():
        time.sleep(0.05)


# --- heads ----------------------------------------------------------------------------------

HEAD_START = (
    b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
    b"content-length: 2\r\n"
)
OVERSIZED_HEADS = {
    # joined quadratically, it held the loop for over a minute, and a 401 came after
    "256,000 repeats of one header": HEAD_START + b"x-repeat: abcdefg\r\n" * 256_000,
    "64 MB of distinct headers": HEAD_START
    + b"".join(b"x-h%07d: %s\r\n" % (n, b"v" * 48) for n in range(1_000_000)),
    "one 64 MB header value": HEAD_START + b"x-big: " + b"v" * (64 << 20) + b"\r\n",
}


@pytest.fixture(scope="module")
def keyed() -> Iterator[Process]:
    """A proxy that needs a key of every caller. The head's deadline is long: the test's client
    sends its whole head before it reads, which the proxy drops until then."""
    extra = "header_timeout_s = 60\n[auth]\nrequire_keys = true"
    with sim(*FAST_ENGINE, "--model", "sim-model") as engine, proxy(config(engine.url, extra)) as p:
        yield p


@pytest.mark.parametrize("name", OVERSIZED_HEADS)
def test_a_head_over_the_limits_is_a_431_before_any_key(keyed: Process, name: str) -> None:
    before = rss_kib(keyed.popen.pid)
    host, port = keyed.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=60) as conn:
        conn.sendall(OVERSIZED_HEADS[name] + b"\r\n{}")
        answer = b""
        while more := conn.recv(65536):  # the proxy closes after its answer
            answer += more
    head, body = answer.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 431"), head
    error = httpx.Response(431, content=body)
    assert openai_error(error)["code"] == "request_header_fields_too_large"
    assert httpx.get(keyed.url + "/healthz", timeout=30).status_code == 200
    assert rss_kib(keyed.popen.pid) - before < 16 * 1024  # no head was kept


def test_heads_within_the_limits_are_served_however_they_arrive(keyed: Process) -> None:
    """256 fields in 60 KB of head; then 100 requests of 1 KB heads pipelined in one write
    (100 KB: more than a head may take, but no head is)."""
    host, port = keyed.url.removeprefix("http://").split(":")
    fields = b"".join(b"x-%d: v\r\n" % n for n in range(254)) + b"x-big: " + b"b" * 60_000
    full = b"GET /healthz HTTP/1.1\r\nhost: x\r\n" + fields + b"\r\n\r\n"
    one = b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-pad: " + b"p" * 1000 + b"\r\n\r\n"
    with socket.create_connection((host, int(port)), timeout=60) as conn:
        conn.sendall(full + one * 100)
        answers = b""
        while answers.count(b"HTTP/1.1 200") < 101:  # the test's timeout is the backstop
            more = conn.recv(65536)
            assert more, "closed before every answer came"
            answers += more
    assert b"HTTP/1.1 431" not in answers


# --- admin ----------------------------------------------------------------------------------


def test_with_required_keys_and_no_admin_key_the_admin_endpoints_are_closed(
    keyed: Process,
) -> None:
    """Keys required of every caller, none declared for admins: the admin endpoints answer no
    one (they were open to anyone), and the proxy said so at start."""
    for method, path in [
        ("GET", "/admin/status"),
        ("GET", "/admin/traffic"),
        ("POST", "/admin/reload"),
    ]:
        for authorization in ({}, {"authorization": "Bearer sk-anything"}):
            response = httpx.request(method, keyed.url + path, headers=authorization, timeout=30)
            assert response.status_code == 401, path
            assert openai_error(response)["type"] == "authentication_error"
    said = "".join(keyed.output)
    assert "require_keys = true and no admin_keys" in said
    assert 'admin_keys = ["env:OVERSPILL_ADMIN_KEY"]' in said


# --- no cross-tenant signals ----------------------------------------------------------------

SYSTEM = "You are the payroll desk; salaries are confidential. " * 60


def _idle(p: Process) -> None:
    """Wait until no backend has anything in flight, as the proxy sees them."""

    def idle() -> bool:
        backends = httpx.get(p.url + "/admin/status").json()["backends"]
        return all(
            b["in_flight"] == 0 and not b["load"]["running"] and not b["load"]["waiting"]
            for b in backends
        )

    _wait_for(idle)


def _globex_sees(acme_first: bool) -> list[tuple[str, ...]]:
    """globex's headers for three questions under SYSTEM, after acme sent its own questions
    under the same system prompt (or sent nothing), each request alone on an idle engine. One
    engine, so that no random tie-break between replicas blurs the comparison: the prefix
    reason alone would tell whether acme's prompt is held."""
    with contextlib.ExitStack() as stack:
        engine = stack.enter_context(sim(*FAST_ENGINE, "--model", "m"))
        text = (
            "[server]\nprobe_interval_s = 0.1\n[cache]\nenabled = false\n"
            + backend_toml("a", "vllm", engine.url)
            + TENANTS
            + '[balancing]\nstrategy = "prefix"\n'
        )
        p = stack.enter_context(proxy(text))

        def ask(tenant: str, question: str) -> httpx.Response:
            _idle(p)
            body = {
                "model": "m",
                "max_tokens": 2,
                "messages": [
                    {"role": "system", "content": SYSTEM},
                    {"role": "user", "content": question},
                ],
            }
            response = httpx.post(
                p.url + "/v1/chat/completions",
                json=body,
                timeout=30,
                headers={"x-overspill-tenant": tenant},
            )
            assert response.status_code == 200
            return response

        if acme_first:
            for n in range(3):
                ask("acme", f"acme question {n}")
        seen = []
        for n in range(3):
            headers = ask("globex", f"globex question {n}").headers
            seen.append(
                tuple(
                    headers.get(name, "")
                    for name in (
                        "x-overspill-route",
                        "x-overspill-reason",
                        "x-overspill-cache",
                        "x-overspill-privacy",
                        "x-overspill-priority",
                    )
                )
            )
        return seen


def test_one_tenants_prompts_leave_no_trace_in_anothers_headers() -> None:
    alone = _globex_sees(acme_first=False)
    after = _globex_sees(acme_first=True)
    assert after == alone
    # globex's own repeats do find its prefix: the index works within a tenant
    assert any("prefix" in reason for _, reason, *_ in alone[1:])


# --- headers across the proxy ---------------------------------------------------------------

PROXY_HEADERS = {
    "content-type",
    "content-length",
    "retry-after",
    "x-request-id",
    "date",
    "server",
    "x-overspill-route",
    "x-overspill-reason",
    "x-overspill-cache",
    "x-overspill-privacy",
    "x-overspill-privacy-because",
    "x-overspill-redacted",
    "x-should-retry",
    "x-overspill-priority",
    "x-overspill-cache-similarity",
    "x-overspill-degraded",
    "x-overspill-dropped",
    "cache-control",
}


def test_only_listed_headers_come_back_and_no_secret_is_shown() -> None:
    engine_key = "sk-engine-key-4321"
    with sim(*FAST_ENGINE, "--model", "sim-model", "--record") as engine:
        backend = backend_toml("local", "vllm", engine.url) + 'api_key_env = "ENGINE_KEY"\n'
        text = "[server]\nprobe_interval_s = 0.2\n" + backend
        with proxy(text, env={"ENGINE_KEY": engine_key}) as p:
            hostile = {
                "authorization": "Bearer sk-client-9999",
                "user-agent": "hostile-agent/1",
                "x-overspill-privacy": "public",
                "cookie": "session=1",
            }
            response = chat(p.url, hostile)
            assert response.status_code == 200
            assert set(response.headers) <= PROXY_HEADERS
            status = httpx.get(p.url + "/admin/status").text + httpx.get(p.url + "/metrics").text
            assert engine_key not in status
            assert "sk-client-9999" not in status


def test_the_engine_sees_the_operators_key_and_none_of_the_clients_headers() -> None:
    engine_key = "sk-engine-key-4321"
    with sim(*FAST_ENGINE, "--model", "sim-model", "--record") as engine:
        backend = backend_toml("local", "vllm", engine.url) + 'api_key_env = "ENGINE_KEY"\n'
        with proxy(
            "[server]\nprobe_interval_s = 0.2\n" + backend, env={"ENGINE_KEY": engine_key}
        ) as p:
            chat(
                p.url,
                {
                    "authorization": "Bearer sk-client-9999",
                    "user-agent": "hostile/1",
                    "x-overspill-privacy": "public",
                },
            )
            recorded = httpx.get(engine.url + "/_sim/requests").json()["requests"]
    chats = [r for r in recorded if r["path"] == "/v1/chat/completions"]
    assert len(chats) == 1
    headers = chats[0]["headers"]
    assert headers["authorization"] == "…" + engine_key[-4:]
    assert "hostile" not in headers.get("user-agent", "")
    assert "x-overspill-privacy" not in headers


def test_pipelined_requests_are_all_answered_in_order_and_not_queued_ahead(
    keyed: Process,
) -> None:
    """256 KB of pipelined GETs (~9,000) in one write, the answers read only afterwards: the
    proxy used to parse and queue them all at once (a scope and cycle each: tens of megabytes
    per connection, kept); it parses a few ahead of its answers, and answers every one, in
    order."""
    host, port = keyed.url.removeprefix("http://").split(":")
    count = 9_000
    pipelined = b"".join(b"GET /healthz?n=%d HTTP/1.1\r\nhost: x\r\n\r\n" % n for n in range(count))
    assert len(pipelined) >= 256 * 1024
    before = rss_kib(keyed.popen.pid)
    with socket.create_connection((host, int(port)), timeout=60) as conn:
        conn.sendall(pipelined)
        answers = b""
        while answers.count(b"HTTP/1.1 ") < count:  # the test's timeout is the backstop
            more = conn.recv(4096)
            assert more, "closed before every answer came"
            answers += more
    statuses = answers.split(b"HTTP/1.1 ")[1:]
    assert all(status.startswith(b"200 ") for status in statuses)
    assert len(statuses) == count
    assert rss_kib(keyed.popen.pid) - before < 8 * 1024  # no thousands of requests were queued
