"""Every API endpoint the proxy serves, described once (pure): its path, what its body must hold,
whether it streams, what the cache may do with it, whether prefix-aware routing applies, the
litellm call that serves it in the cloud and the body fields that may travel there.

Adding an endpoint is a row here (and its body's shape where a reader needs it: the cache keys,
the simulator). The handlers, the parser, the cache plan, affinity, explain and the cloud leg
read this table; none of them names an endpoint.

The cloud allow-lists hold only the OpenAI API's own request parameters, and not all of those:
why, in proxy/legs/cloud_params.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from cache.keys import EndpointCaching
from proxy.errors import BadRequest

Endpoint = Literal["chat", "completions", "embeddings"]


@dataclass(frozen=True)
class EndpointSpec:
    name: Endpoint
    path: str
    check: Callable[[dict[str, Any]], None]  # its own body fields (model and stream: for all)
    streams: bool  # may be streamed
    caching: EndpointCaching  # what the cache may do with its answers
    prefix_routed: bool  # its prompt may sit in an engine's KV cache: prefix-aware routing
    cloud_call: str  # the litellm coroutine that serves it in the cloud
    cloud_params: frozenset[str]  # the body fields that may travel to a cloud call


def check_messages(messages: Any) -> list[dict[str, Any]]:
    """A chat's `messages`: a non-empty array of objects with a string role."""
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty array", param="messages")
    for i, message in enumerate(messages):
        check_message(message, f"messages[{i}]")
    return messages


def check_message(message: Any, where: str) -> None:
    if not isinstance(message, dict):
        raise BadRequest(f"'{where}' must be an object", param=where)
    if not isinstance(message.get("role"), str):
        raise BadRequest(f"'{where}.role' is required and must be a string", param=f"{where}.role")
    content = message.get("content")
    if content is not None and not isinstance(content, str | list):
        raise BadRequest(
            f"'{where}.content' must be a string or an array of content parts",
            param=f"{where}.content",
        )


def _check_chat(body: dict[str, Any]) -> None:
    check_messages(body.get("messages"))


def _check_completions(body: dict[str, Any]) -> None:
    if not isinstance(body.get("prompt"), str | list):
        raise BadRequest("'prompt' must be a string or an array", param="prompt")


def _check_embeddings(body: dict[str, Any]) -> None:
    if not isinstance(body.get("input"), str | list):
        raise BadRequest("'input' must be a string or an array", param="input")


_SAMPLING = frozenset(
    {
        "frequency_penalty",
        "presence_penalty",
        "logit_bias",
        "logprobs",
        "n",
        "seed",
        "stop",
        "stream_options",
        "temperature",
        "top_p",
        "user",
        "max_tokens",
    }
)
_CHAT = frozenset(
    {
        "messages",
        "audio",
        "function_call",
        "functions",
        "max_completion_tokens",
        "modalities",
        "parallel_tool_calls",
        "prediction",
        "prompt_cache_key",
        "reasoning_effort",
        "response_format",
        "safety_identifier",
        "tool_choice",
        "tools",
        "top_logprobs",
        "verbosity",
        "web_search_options",
    }
)

ENDPOINTS: Mapping[Endpoint, EndpointSpec] = {
    "chat": EndpointSpec(
        name="chat",
        path="/v1/chat/completions",
        check=_check_chat,
        streams=True,
        caching=EndpointCaching("chat", replayable=True, semantic=True),
        prefix_routed=True,
        cloud_call="acompletion",
        cloud_params=_SAMPLING | _CHAT,
    ),
    "completions": EndpointSpec(
        name="completions",
        path="/v1/completions",
        check=_check_completions,
        streams=True,
        caching=EndpointCaching("completions", replayable=True, semantic=False),
        prefix_routed=True,
        cloud_call="atext_completion",
        cloud_params=_SAMPLING | {"prompt", "best_of", "echo", "suffix"},
    ),
    "embeddings": EndpointSpec(
        name="embeddings",
        path="/v1/embeddings",
        check=_check_embeddings,
        streams=False,
        caching=EndpointCaching("embeddings", replayable=False, semantic=False),
        prefix_routed=False,
        cloud_call="aembedding",
        cloud_params=frozenset({"input", "dimensions", "encoding_format", "user"}),
    ),
}


def endpoint_named(name: str) -> EndpointSpec:
    """The endpoint a name given by a client (explain's query) stands for, or a 400."""
    if name not in ENDPOINTS:
        raise BadRequest(f"endpoint must be one of {', '.join(ENDPOINTS)}", param="endpoint")
    return ENDPOINTS[name]  # type: ignore[index]
