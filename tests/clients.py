"""Client-side helpers shared by the simulator's and the proxy's tests."""

from __future__ import annotations

import json
import socket
from typing import Any

import httpx
from hypothesis import strategies as st

# Any JSON value, to fuzz request bodies with.
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.text(max_size=20)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)


def send_raw(url: str, path: str, body: dict[str, Any]) -> socket.socket:
    """POST `body` on a raw socket, so a test can close the connection whenever it likes."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    payload = json.dumps(body).encode()
    sock.sendall(
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n".encode()
        + f"Content-Length: {len(payload)}\r\n\r\n".encode()
        + payload
    )
    return sock


def assert_openai_error(
    response: httpx.Response, status: int, param: str | None = None
) -> dict[str, Any]:
    """The response is `status` with OpenAI's error object (naming `param`, if given)."""
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"]
    if param is not None:
        assert error["param"] == param
    return error
