"""What determines an answer: a request's cache keys, and whether it may be cached (pure).

The exact key covers everything that shapes the answer: the tenant, the public model and the
version of what serves it, the endpoint and the whole body except the fields that only change
its delivery (`stream`, `stream_options`) or bookkeeping (`metadata`, `user`). Unknown fields are
kept in the key: a field we do not know may change the answer, and a miss costs less than a
wrong hit.

A semantic lookup compares only the last user message's text, so everything else must match
exactly: its `context` key covers the same scope and parameters, every message before that one
(the system prompt and the earlier turns) and every other field of that message (`name`, and
any a newer API adds: a model reads them, the comparison does not).

Only a question the comparison can read whole, and exactly as a model reads it, is compared:
- at most `MAX_QUESTION_CHARS` characters. The embedder reads 256 tokens and the verifier a
  pair in 256, so a longer question's end would go unread (two questions differing only there
  would look the same), and every step before them (the typo mender, the guard) reads no more;
- none of the characters a person and the embedder do not see but a model may read: format
  characters (zero-width and bidirectional marks, invisible operators; a zero-width joiner in
  an emoji is kept), variation selectors (beyond an emoji's text or picture form), private use,
  unassigned and surrogate code points, control characters but tab and newlines. Text hidden so
  poisoned a shared cache at similarity 1.0 (issue 30).
Any other question still has the exact layer.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from policies.model import CacheRule

DELIVERY_ONLY = frozenset({"stream", "stream_options", "metadata", "user", "model"})
# Longest question the semantic layer compares (p99 of the labelled sets' questions: 176).
MAX_QUESTION_CHARS = 512
_UNSEEN_CATEGORIES = frozenset({"Cf", "Co", "Cn", "Cs", "Cc"})
_WHITESPACE = frozenset("\t\n\r")
# An emoji's joiner and its text or picture form are seen only right after an emoji (or its
# skin tone; a joiner after a picture form too): elsewhere, twenty of them padded a planted
# question to similarity 1.0000.
_EMOJI_MARKS = frozenset("\u200d\ufe0e\ufe0f")
_EMOJI_CATEGORIES = frozenset({"So", "Sk"})
# Default-ignorable characters outside the format category: drawn as nothing all the same
# (combining grapheme joiner, Hangul fillers, Khmer inherent vowels, Mongolian variation
# selectors).
_IGNORABLE = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180f\u3164\uffa0")


@dataclass(frozen=True)
class EndpointCaching:
    """What an endpoint lets the cache do with its answers (proxy/endpoints.py sets one each)."""

    name: str
    replayable: bool  # an answer may be kept, and replayed for the same request
    semantic: bool  # ... and for a similar last user message


@dataclass(frozen=True)
class CacheKeys:
    scope: str  # tenant x public model x version: where TTL and LRU apply
    exact: str
    context: str | None  # None: the request has no last user message to compare
    query: str | None  # the last user message's text


@dataclass(frozen=True)
class CachePlan:
    lookup: bool  # look the answer up (exact, then semantic when `semantic`)
    semantic: bool
    store: bool  # keep the answer once complete
    coalesce: bool  # share an identical request's upstream call
    why: str  # why not cached, for the header and the log ("" when cached)

    @property
    def status(self) -> str:
        """X-Overspill-Cache for a request answered upstream."""
        return "miss" if self.lookup else "bypass"


def model_version(parts: Iterable[str]) -> str:
    """A short digest of what serves a public model: a change of engine model, backend or cloud
    target gives a new version, and the old answers are not found any more."""
    return _digest(sorted(parts))[:16]


def cache_keys(
    endpoint: str, body: Mapping[str, Any], tenant: str, model: str, version: str
) -> CacheKeys:
    scope = _digest([tenant, model, version])
    parameters = {k: v for k, v in body.items() if k not in DELIVERY_ONLY}
    exact = _digest([scope, endpoint, parameters])
    messages = body.get("messages")
    split = _last_user(messages) if endpoint == "chat" and isinstance(messages, list) else None
    if split is None:
        return CacheKeys(scope, exact, None, None)
    before, query = split
    assert isinstance(messages, list)
    del parameters["messages"]
    beside = {k: v for k, v in messages[before].items() if k != "content"}
    context = _digest([scope, endpoint, parameters, messages[:before], beside])
    return CacheKeys(scope, exact, context, query)


def _last_user(messages: list[Any]) -> tuple[int, str] | None:
    """(index, text) of the last message when it is the user's, all text, and comparable
    (`comparable`); else None: an answer to a tool result or an image is not one to guess from
    a similar question."""
    if not messages or not isinstance(messages[-1], dict) or messages[-1].get("role") != "user":
        return None
    content = messages[-1].get("content")
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        texts = [text for text in parts if isinstance(text, str)]
        if len(texts) != len(content) or sum(map(len, texts)) > MAX_QUESTION_CHARS:
            return None  # not all text, or too long to compare (known before joining it)
        content = "\n".join(texts)
    if not isinstance(content, str) or not comparable(content):
        return None
    return len(messages) - 1, content


def comparable(question: str) -> bool:
    """Whether the semantic layer can read `question` whole, as a model reads it (linear, and
    at most MAX_QUESTION_CHARS characters read)."""
    if len(question) > MAX_QUESTION_CHARS or not question.strip():
        return False
    if question.isascii():
        return question.isprintable() or all(c.isprintable() or c in _WHITESPACE for c in question)
    previous = ""
    for char in question:
        if _unseen(char, previous):
            return False
        previous = char
    return True


def _unseen(char: str, previous: str) -> bool:
    if char in _WHITESPACE:
        return False
    if char in _EMOJI_MARKS:  # a form right after an emoji, a joiner after one or its form
        after_emoji = unicodedata.category(previous or " ") in _EMOJI_CATEGORIES
        return not (after_emoji or (char == "\u200d" and previous == "\ufe0f"))
    code = ord(char)
    if 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF or char in _IGNORABLE:
        return True
    return unicodedata.category(char) in _UNSEEN_CATEGORIES


def cache_plan(
    endpoint: EndpointCaching,
    body: Mapping[str, Any],
    rule: CacheRule,
    level_cache: str,
    has_tenant: bool,
    cache_control: str = "",
    sharing: Sharing | None = None,
) -> CachePlan:
    """May this request be answered from the cache, stored in it, or share an in-flight call?"""
    deterministic = _deterministic(body, rule)
    coalesce = rule.coalesce and (deterministic or rule.coalesce_nondeterministic)
    why = _why_not_cached(endpoint, body, rule, level_cache, has_tenant, deterministic)
    directives = {d.strip().lower() for d in cache_control.split(",")}
    if not why and "no-store" in directives:
        why = "Cache-Control: no-store"
    if why:
        return CachePlan(False, False, False, coalesce, why)
    lookup = "no-cache" not in directives
    # a tool call answers this exact request: a similar question may need other arguments
    semantic = rule.semantic and endpoint.semantic and not body.get("tools")
    semantic = semantic and (sharing or Sharing()).semantic(rule)
    return CachePlan(lookup, semantic and lookup, True, coalesce, "" if lookup else "no-cache")


@dataclass(frozen=True)
class Sharing:
    """What the semantic layer must know of a request beyond its body: a similar question's
    answer is another caller's answer, so it is served (and this one's kept for others) only
    where neither side can abuse it."""

    keyed: bool = True  # the caller gave a key: its scope is its tenant's own
    personal: bool = False  # the detectors found personal data in it

    def semantic(self, rule: CacheRule) -> bool:
        # Personal data: only the same values are the same question; the exact layer has them.
        # No key: anyone can store what a paraphrase of someone else's question is served.
        return not self.personal and (self.keyed or rule.semantic_unkeyed)


def _why_not_cached(
    endpoint: EndpointCaching,
    body: Mapping[str, Any],
    rule: CacheRule,
    level_cache: str,
    has_tenant: bool,
    deterministic: bool,
) -> str:
    if not endpoint.replayable:
        return f"{endpoint.name} are not cached"
    if not (rule.exact or rule.semantic):
        return "caching off for this route"
    if not deterministic:
        return f"temperature {body.get('temperature')!r} is not 0"
    if body.get("tools") and not rule.tools:
        return "requests with tools are not cached"
    if level_cache == "none":
        return "privacy level: never cached"
    if level_cache == "tenant" and not has_tenant:
        return "privacy level: cached only for a known tenant"
    return ""


def _deterministic(body: Mapping[str, Any], rule: CacheRule) -> bool:
    temperature = body.get("temperature")
    if temperature is None:
        return rule.unset_temperature
    return (
        isinstance(temperature, int | float)
        and not isinstance(temperature, bool)
        and (temperature == 0)
    )


def _digest(value: Any) -> str:
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()
