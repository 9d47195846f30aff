"""A streamed answer as one completion, and a completion as a stream (pure).

The cache keeps every answer in the non-streamed form. A stream is assembled from its SSE chunks
once it has ended well (`data: [DONE]`, no error event); a cached answer is replayed to a
streaming client as chunks of the same shape an engine sends: a role chunk, the text in pieces
(each with the logprobs of the tokens that start in it), each tool call (its name, then its
arguments in pieces), the finish reason (with a legacy completion's logprobs), the usage when
`stream_options.include_usage` asks for it, then `[DONE]`. A client that adds the chunks up
gets the whole answer back: text, tool calls, logprobs, finish reason and usage. Only the legacy
`function_call` is not rebuilt: such an answer is not cached.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Iterator
from typing import Any

import orjson

DONE = b"data: [DONE]\n\n"
PIECE_CHARS = 64  # replayed text per chunk: small enough to look like a stream, few enough events


def events(raw: bytes) -> Iterator[bytes]:
    """The data of each SSE event in a stream's bytes, however its chunks were cut."""
    for block in raw.replace(b"\r\n", b"\n").split(b"\n\n"):
        data = [line[5:].strip() for line in block.split(b"\n") if line.startswith(b"data:")]
        if data:
            yield b"\n".join(data)


def assemble(chunks: list[bytes]) -> bytes | None:
    """The completion a complete stream adds up to; None if it did not end well or carries
    something we do not rebuild (tool calls): such an answer is simply not cached."""
    payloads = list(events(b"".join(chunks)))
    if not payloads or payloads[-1] != b"[DONE]":
        return None
    head: dict[str, Any] = {}
    choices: dict[int, dict[str, Any]] = {}
    for payload in payloads[:-1]:
        try:
            chunk = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(chunk, dict) or "error" in chunk:
            return None
        head = head or chunk
        if chunk.get("usage"):
            head = {**head, "usage": chunk["usage"]}
        for choice in chunk.get("choices") or []:
            if not _merge(choices.setdefault(choice.get("index", 0), {}), choice):
                return None
    if not choices:  # nothing but [DONE]: not an answer worth keeping
        return None
    return orjson.dumps(_completion(head, choices))


def _merge(into: dict[str, Any], choice: dict[str, Any]) -> bool:
    """Add one chunk's choice to what its index holds so far: text as a list of pieces, joined
    once at the end (adding strings up re-copied the whole answer at every chunk)."""
    delta = choice.get("delta")
    if isinstance(delta, dict):
        if delta.get("function_call"):
            return False
        calls = delta.get("tool_calls") or []
        if not isinstance(calls, list) or not all(_merge_call(into, call) for call in calls):
            return False
        _gathered(into, "content").append(delta.get("content") or "")
        into["role"] = delta.get("role") or into.get("role", "assistant")
        if delta.get("reasoning_content"):
            _gathered(into, "reasoning_content").append(delta["reasoning_content"])
    else:
        _gathered(into, "text").append(choice.get("text") or "")
    if choice.get("finish_reason"):
        into["finish_reason"] = choice["finish_reason"]
    logprobs = choice.get("logprobs")
    if isinstance(logprobs, dict):
        merged = into.setdefault("logprobs", {})
        for key, value in logprobs.items():
            if isinstance(value, list):  # token by token: added up
                _gathered(merged, key).extend(value)
            else:
                merged.setdefault(key, value)
    return True


def _gathered(into: dict[str, Any], key: str) -> list[Any]:
    """The list `into[key]` gathers pieces in (a value of another kind there is replaced)."""
    pieces = into.get(key)
    if not isinstance(pieces, list):
        pieces = into[key] = []
    return pieces


def _merge_call(into: dict[str, Any], call: Any) -> bool:
    """A tool call's delta: its id, type and name come once, its arguments in pieces."""
    if not isinstance(call, dict) or not isinstance(call.get("function") or {}, dict):
        return False
    blank = {"id": "", "type": "function", "function": {"name": [], "arguments": []}}
    kept = into.setdefault("tool_calls", {}).setdefault(call.get("index", 0), blank)
    kept["id"] = call.get("id") or kept["id"]
    kept["type"] = call.get("type") or kept["type"]
    function = call.get("function") or {}
    kept["function"]["name"].append(function.get("name") or "")
    kept["function"]["arguments"].append(function.get("arguments") or "")
    return True


def _call(kept: dict[str, Any]) -> dict[str, Any]:
    function = kept["function"]
    joined = {"name": "".join(function["name"]), "arguments": "".join(function["arguments"])}
    return {**kept, "function": joined}


def _completion(head: dict[str, Any], choices: dict[int, dict[str, Any]]) -> dict[str, Any]:
    chat = head.get("object", "").startswith("chat.")
    rendered = []
    for index, parts in sorted(choices.items()):
        finish = parts.get("finish_reason")
        if chat:
            content = "".join(parts.get("content", ()))
            message = {"role": parts.get("role", "assistant"), "content": content}
            if "reasoning_content" in parts:
                message["reasoning_content"] = "".join(parts["reasoning_content"])
            if "tool_calls" in parts:
                calls = parts["tool_calls"]
                message["tool_calls"] = [_call(calls[i]) for i in sorted(calls)]
                message["content"] = message["content"] or None  # as engines say it
            choice = {"index": index, "message": message, "finish_reason": finish}
        else:
            text = "".join(parts.get("text", ()))
            choice = {"index": index, "text": text, "finish_reason": finish}
        choice["logprobs"] = parts.get("logprobs")  # null when there are none, as engines say
        rendered.append(choice)
    completion = {
        "id": head.get("id", ""),
        "object": "chat.completion" if chat else "text_completion",
        "created": head.get("created", int(time.time())),
        "model": head.get("model", ""),
        "choices": rendered,
    }
    if head.get("usage"):
        completion["usage"] = head["usage"]
    return completion


def fresh(answer: bytes) -> dict[str, Any]:
    """A cached completion with an id and a creation time of its own."""
    completion: dict[str, Any] = orjson.loads(answer)
    prefix = "chatcmpl" if completion.get("object") == "chat.completion" else "cmpl"
    completion["id"] = f"{prefix}-{uuid.uuid4().hex}"
    completion["created"] = int(time.time())
    return completion


def replay(completion: dict[str, Any], include_usage: bool) -> list[bytes]:
    """A completion as the SSE chunks a streaming client expects."""
    chat = completion.get("object") == "chat.completion"
    base = {
        "id": completion["id"],
        "object": "chat.completion.chunk" if chat else "text_completion",
        "created": completion["created"],
        "model": completion.get("model", ""),
    }
    chunks = []
    for choice in completion.get("choices") or []:
        index = choice.get("index", 0)
        if chat:
            message = choice.get("message") or {}
            text = message.get("content") or ""
            pieces = [{"role": message.get("role", "assistant"), "content": ""}]
            pieces += [
                {"reasoning_content": p} for p in _pieces(message.get("reasoning_content") or "")
            ]
            texts = _pieces(text)
            spread = _spread(choice.get("logprobs"), texts)
            no_tokens: list[dict[str, Any] | None] = [None] * len(texts)
            tokens = [None] * len(pieces) + (list(spread) if spread else no_tokens)
            pieces += [{"content": p} for p in texts]
            pieces += _call_deltas(message.get("tool_calls") or [])
            chunks += [
                _chunk(base, _delta_choice(index, d, logprobs))
                for d, logprobs in itertools.zip_longest(pieces, tokens)
            ]
            last = {"index": index, "delta": {}, "finish_reason": choice.get("finish_reason")}
        else:
            chunks += [
                _chunk(base, {"index": index, "text": p, "finish_reason": None})
                for p in _pieces(choice.get("text") or "")
            ]
            last = {"index": index, "text": "", "finish_reason": choice.get("finish_reason")}
        if isinstance(choice.get("logprobs"), dict) and not (chat and spread):
            last["logprobs"] = choice["logprobs"]  # all of them, with the finish reason
        chunks.append(_chunk(base, last))
    if include_usage and completion.get("usage"):
        usage = {**base, "choices": [], "usage": completion["usage"]}
        chunks.append(b"data: " + orjson.dumps(usage) + b"\n\n")
    chunks.append(DONE)
    return chunks


def _call_deltas(calls: list[Any]) -> list[dict[str, Any]]:
    """Each tool call as engines stream it: its id, type and name, then its arguments in
    pieces."""
    deltas: list[dict[str, Any]] = []
    for index, call in enumerate(calls):
        function = call.get("function") or {}
        named = {"name": function.get("name", ""), "arguments": ""}
        opening = {
            "index": index,
            "id": call.get("id"),
            "type": call.get("type"),
            "function": named,
        }
        deltas.append({"tool_calls": [opening]})
        deltas += [
            {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}
            for piece in _pieces(function.get("arguments") or "")
        ]
    return deltas


def _delta_choice(index: int, delta: dict[str, Any], logprobs: Any) -> dict[str, Any]:
    choice = {"index": index, "delta": delta, "finish_reason": None}
    return choice if logprobs is None else {**choice, "logprobs": logprobs}


def _spread(logprobs: Any, texts: list[str]) -> list[dict[str, Any]] | None:
    """A chat choice's logprobs cut to go with each piece of its text, as engines send them
    token by token: each token with the piece it starts in. None when its tokens do not spell
    the text: then they all go with the finish reason, as one block."""
    tokens = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not texts or not isinstance(tokens, list):
        return None
    if not all(isinstance(t, dict) and isinstance(t.get("token"), str) for t in tokens):
        return None
    if "".join(t["token"] for t in tokens) != "".join(texts):
        return None
    rest = {key: value for key, value in logprobs.items() if key != "content"}
    ends = list(itertools.accumulate(len(text) for text in texts))
    parts: list[list[Any]] = [[] for _ in texts]
    offset = piece = 0
    for token in tokens:
        while offset >= ends[piece] and piece < len(texts) - 1:
            piece += 1
        parts[piece].append(token)
        offset += len(token["token"])
    return [{**rest, "content": part} for part in parts]


def _pieces(text: str) -> list[str]:
    """The text cut at spaces into pieces of about PIECE_CHARS characters."""
    pieces, start = [], 0
    while start < len(text):
        end = start + PIECE_CHARS
        space = text.find(" ", end)
        end = len(text) if space < 0 else space
        pieces.append(text[start:end])
        start = end
    return pieces


def _chunk(base: dict[str, Any], choice: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps({**base, "choices": [choice]}) + b"\n\n"
