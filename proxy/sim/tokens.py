"""A deterministic stand-in for a tokenizer, a chat template and a model's output.

Token counts drive everything the simulator models (prefill cost, KV blocks, usage), so they must
be consistent rather than exact: words, digit groups and punctuation each count as one token, and
joining the tokens of a text gives the text back, so generated text re-tokenizes to the same tokens
when a client sends it back in the next turn (which is what lets multi-turn prefixes hit the cache).
"""

from __future__ import annotations

import hashlib
import math
import random
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

# Special markers whole; a word, digit group or symbol with at most one leading space; runs of
# whitespace leave their last space to the word after them (as GPT-2's pattern does), so a text
# tokenizes the same whether or not it is split at a space.
_TOKEN = re.compile(
    r"<\|[a-z_]+\|>| ?[A-Za-z]+| ?\d{1,3}| ?(?!<\|[a-z_]+\|>)[^\sA-Za-z\d]|\s+(?!\S)|\s+"
)

# A small vocabulary for generated text; the leading spaces keep the join/tokenize round trip.
_WORDS = (
    "the of and to in is that for it as with was on be by this are from at or an which have "
    "not can all their more one will about there been has when time some into two them only "
    "other new model tokens request engine cache answer local cloud queue batch prefix memory "
    "latency throughput value system result first data each state load route policy stream "
    "simple plan test server client reply order great small large early later fast slow"
).split()
VOCABULARY = tuple(" " + word for word in _WORDS)


def tokenize(text: str) -> list[str]:
    return _TOKEN.findall(text)


def count_tokens(text: str) -> int:
    return len(_TOKEN.findall(text))


def render_chat(messages: Sequence[dict[str, Any]], tools: Sequence[Any] = ()) -> str:
    """A ChatML-like template: what the engine actually prefills for a chat request.

    The tools' definitions come first, as chat templates put them in the system turn, so a
    request pays for them in prompt tokens; an assistant turn's tool calls are rendered as the
    tokens that produced them (ToolCall.tokens), so the next turn's prompt starts with what the
    engine already holds.
    """
    parts = (
        [f"<|im_start|>tools\n{orjson.dumps(list(tools)).decode()}<|im_end|>\n"] if tools else []
    )
    parts += [
        f"<|im_start|>{message.get('role', 'user')}\n{_turn_text(message)}<|im_end|>\n"
        for message in messages
    ]
    parts.append("<|im_start|>assistant\n")
    return "".join(parts)


def _turn_text(message: dict[str, Any]) -> str:
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return message_text(message)
    functions = [call.get("function") for call in calls if isinstance(call, dict)]
    said = [
        f"{f.get('name', '')}{f.get('arguments', '')}" for f in functions if isinstance(f, dict)
    ]
    return message_text(message) + "".join(said)


def message_text(message: dict[str, Any]) -> str:
    """A message's text; content parts other than text are counted by their JSON-ish form."""
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return " ".join(
        str(part.get("text", "")) if isinstance(part, dict) else str(part) for part in content
    )


@dataclass(frozen=True)
class ToolCall:
    """The one tool call an answer makes: the function's name and its JSON arguments."""

    name: str
    arguments: str

    def tokens(self) -> tuple[str, ...]:
        """What the engine generates for it, counted like any answer (usage, KV, steps): the
        name's tokens, then the arguments'."""
        return (*tokenize(self.name), *tokenize(self.arguments))


@dataclass(frozen=True)
class OutputPlan:
    """The whole answer a sequence will produce, decided when it arrives."""

    tokens: tuple[str, ...]
    finish_reason: str  # "stop", "length" or "tool_calls"
    stop_sequence: str | None = None  # the stop string the answer was cut at (Anthropic says it)
    call: ToolCall | None = None  # the tokens are this call's, not text

    @property
    def text(self) -> str:
        return "".join(self.tokens)

    @property
    def name_tokens(self) -> int:
        """How many leading tokens spell the call's name (0 for a text answer)."""
        return count_tokens(self.call.name) if self.call else 0

    def call_so_far(self, generated: int) -> ToolCall | None:
        """The call as far as `generated` tokens go: none until its name is whole (as engines'
        tool parsers, which send nothing of a call before its name), then its arguments so far."""
        if self.call is None or generated < self.name_tokens:
            return None
        return ToolCall(self.call.name, "".join(self.tokens[self.name_tokens : generated]))


def plan_call(call: ToolCall, limit: int | None) -> OutputPlan:
    """A tool call's answer: finish "tool_calls", or "length" when `limit` cuts it short.

    A call ends when its arguments are whole, so max_tokens only caps it (an engine's ignore_eos
    does not lengthen a call either); stop strings apply to text, not to a call.
    """
    tokens = call.tokens()
    if limit is not None and limit < len(tokens):
        return OutputPlan(tokens[:limit], "length", call=call)
    return OutputPlan(tokens, "tool_calls", call=call)


def request_seed(model: str, prompt: str, seed: int | None, temperature: float) -> int:
    """Same request, same answer; sampling with temperature > 0 and no seed varies per call."""
    if seed is None and temperature > 0:
        return random.getrandbits(64)
    digest = hashlib.blake2b(f"{model}\x00{seed}\x00{prompt}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def plan_output(
    seed: int,
    max_tokens: int | None,
    natural_length: int,
    stop: Sequence[str] = (),
) -> OutputPlan:
    """Exactly `max_tokens` tokens (finish "length"), or a natural answer that ends with "stop".

    Answers run to max_tokens, as engines do with ignore_eos in benchmarks, so tests and
    benchmarks control output length exactly; without max_tokens the length is drawn from the
    profile's distribution. A stop string cuts the text just before it, as the engines do.
    """
    rng = random.Random(seed)
    length = natural_length if max_tokens is None else max_tokens
    tokens = [_sentence_word(rng, i) for i in range(length)]
    finish_reason = "stop" if max_tokens is None else "length"
    for i, token in enumerate(tokens):
        if token == "." and i + 1 < length and tokens[i + 1] != ".":
            tokens[i + 1] = " " + tokens[i + 1][1:].capitalize()
    if stop:
        cut = _cut_at_stop(tokens, stop)
        if cut is not None:
            kept, matched = cut
            return OutputPlan(tuple(kept), "stop", matched)
    return OutputPlan(tuple(tokens), finish_reason)


def _sentence_word(rng: random.Random, index: int) -> str:
    if index > 0 and rng.random() < 0.08:
        return "."
    return rng.choice(VOCABULARY)


def _cut_at_stop(tokens: list[str], stop: Sequence[str]) -> tuple[list[str], str] | None:
    """The tokens before the first stop string found, and that string."""
    text = "".join(tokens)
    found = [(text.find(s), s) for s in stop if s and s in text]
    if not found:
        return None
    end, matched = min(found, key=lambda pair: pair[0])
    kept: list[str] = []
    used = 0
    for token in tokens:
        if used + len(token) > end:
            if end > used:
                kept.append(token[: end - used])
            break
        kept.append(token)
        used += len(token)
    return kept, matched


def natural_length(seed: int, mean: int, distribution: str) -> int:
    """How long an unconstrained answer is: the profile's output-length distribution."""
    rng = random.Random(seed ^ 0x5EED)
    if distribution == "fixed":
        return mean
    if distribution == "uniform":
        return max(1, rng.randint(mean // 2, mean + mean // 2))
    return max(1, round(rng.expovariate(1 / mean)))


def embed(text: str, dim: int) -> list[float]:
    """A hashed bag of words, normalised: deterministic, and similar texts get similar vectors."""
    vector = [0.0] * dim
    for token in tokenize(text.lower()):
        word = token.strip()
        if not word:
            continue
        h = zlib.crc32(word.encode())
        vector[h % dim] += 1.0 if h & 0x80000000 else -1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]
