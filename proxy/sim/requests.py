"""Request bodies the simulator accepts, parsed and validated into plain objects (no I/O).

Validation follows what the engines themselves reject, with OpenAI-shaped 400s that name the
offending parameter. A chat request's `tools` and `tool_choice` decide whether its answer is a
tool call (tools.py), and `logprobs` / `top_logprobs` whether it carries log probabilities;
fields the simulator does not model (response_format, a completions request's `logprobs` ...)
are accepted and ignored, as an engine that supports them would not fail on them either.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from proxy.endpoints import check_message, check_messages
from proxy.errors import BadRequest
from proxy.sim.logprobs import MAX_TOP_LOGPROBS
from proxy.sim.tokens import ToolCall, message_text, render_chat
from proxy.sim.tools import call_for, parse_tools


@dataclass(frozen=True)
class GenerationRequest:
    model: str
    prompt: str  # what the engine prefills: the rendered chat or the raw completion prompt
    max_tokens: int | None
    stop: tuple[str, ...]
    seed: int | None
    temperature: float
    stream: bool
    include_usage: bool
    keep_alive_s: float | None = None  # Ollama only
    echo: str = ""  # the last message's text, or the prompt: what an echo profile answers
    # True: an answer runs to max_tokens (as with vLLM's ignore_eos), so benchmarks set output
    # lengths exactly. Anthropic's max_tokens is mandatory (clients send a large one), so there
    # it only caps an answer of natural length.
    fills_max_tokens: bool = True
    call: ToolCall | None = None  # the answer is this tool call, not text
    logprobs: int | None = None  # how many top_logprobs each token's entry has; None: no logprobs


@dataclass(frozen=True)
class EmbeddingRequest:
    model: str
    inputs: tuple[str, ...]


def parse_chat(body: dict[str, Any]) -> GenerationRequest:
    messages = check_messages(body.get("messages"))
    tools = parse_tools(body.get("tools"))
    call = call_for(tools, body.get("tool_choice"), messages)
    prompt = render_chat(messages, body["tools"] if tools else ())
    request = _generation(body, prompt, _max_tokens(body))
    echo = message_text(messages[-1])
    return dataclasses.replace(request, echo=echo, call=call, logprobs=_logprobs(body))


def parse_completions(body: dict[str, Any]) -> tuple[GenerationRequest, ...]:
    """One request per prompt, in order: a batched `prompt` is answered prompt by prompt, each
    prompt its own sequence, with the body's other fields shared."""
    prompts = completion_prompts(body.get("prompt"))
    shared = _generation(body, prompts[0], _max_tokens(body, 16))
    return tuple(dataclasses.replace(shared, prompt=prompt, echo=prompt) for prompt in prompts)


def completion_prompts(prompt: Any) -> tuple[str, ...]:
    """The prompts of a completions body, as OpenAI reads `prompt`: a string, an array of token
    ids (one prompt), or a batch: an array of strings or an array of token-id arrays."""
    if isinstance(prompt, str):
        return (prompt,)
    if _is_token_ids(prompt):
        return (_token_text(prompt),)
    if isinstance(prompt, list) and prompt and all(isinstance(item, str) for item in prompt):
        return tuple(prompt)
    if isinstance(prompt, list) and prompt and all(_is_token_ids(item) for item in prompt):
        return tuple(_token_text(item) for item in prompt)
    raise BadRequest(
        "'prompt' must be a string, an array of token ids, an array of strings or an array of "
        "token-id arrays (not empty, not mixed)",
        param="prompt",
    )


def parse_embeddings(body: dict[str, Any]) -> EmbeddingRequest:
    raw = body.get("input")
    if isinstance(raw, str):
        inputs: tuple[str, ...] = (raw,)
    elif isinstance(raw, list) and raw and all(isinstance(item, str) for item in raw):
        inputs = tuple(raw)
    elif isinstance(raw, list) and raw and all(_is_int(item) for item in raw):
        inputs = (" ".join(str(item) for item in raw),)
    else:
        raise BadRequest(
            "'input' must be a string, an array of strings or an array of token ids",
            param="input",
        )
    return EmbeddingRequest(model=_model(body), inputs=inputs)


def parse_ollama(body: dict[str, Any], chat: bool) -> GenerationRequest:
    """Ollama's native /api/chat and /api/generate: options.num_predict, stream by default."""
    options = body.get("options") or {}
    if not isinstance(options, dict):
        raise BadRequest("'options' must be an object", param="options")
    if chat:
        messages = body.get("messages") or []
        if not isinstance(messages, list):
            raise BadRequest("'messages' must be an array", param="messages")
        for i, message in enumerate(messages):
            check_message(message, f"messages[{i}]")
        prompt = render_chat(messages)
    else:
        prompt = _ollama_generate_prompt(body)
    num_predict = options.get("num_predict")
    if num_predict is not None and not _is_int(num_predict):
        raise BadRequest("'options.num_predict' must be an integer", param="options.num_predict")
    merged = {
        "model": body.get("model"),
        "stream": body.get("stream", True),
        "seed": options.get("seed"),
        "temperature": options.get("temperature"),
        "stop": options.get("stop"),
    }
    max_tokens = None if num_predict is None or num_predict < 0 else num_predict
    request = _generation(merged, prompt, max_tokens)
    return GenerationRequest(
        **{**request.__dict__, "keep_alive_s": parse_keep_alive(body.get("keep_alive"))}
    )


_GO_DURATION = re.compile(r"([0-9]*\.?[0-9]+)(ns|us|µs|ms|s|m|h)")
_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_keep_alive(value: Any) -> float | None:
    """Ollama's keep_alive: seconds as a number, or a Go duration string ("5m", "1h30m", "0").

    A negative duration keeps the model loaded for ever, as Ollama does.
    """
    if value is None:
        return None
    if _is_number(value):
        return float(value)
    if isinstance(value, str):
        sign = -1.0 if value.startswith("-") else 1.0
        text = value.lstrip("+-")
        if text == "0":
            return 0.0
        parts = _GO_DURATION.findall(text)
        if parts and "".join(number + unit for number, unit in parts) == text:
            return sign * sum(float(number) * _GO_UNITS[unit] for number, unit in parts)
    raise BadRequest(f"invalid keep_alive duration: {value!r}", param="keep_alive")


# -- pieces ----------------------------------------------------------------------------------


def _generation(body: dict[str, Any], prompt: str, max_tokens: int | None) -> GenerationRequest:
    n = body.get("n")
    if n is not None and n != 1:
        raise BadRequest("only n=1 is supported by the simulator", param="n")
    return GenerationRequest(
        model=_model(body),
        prompt=prompt,
        max_tokens=max_tokens,
        stop=_stop(body.get("stop")),
        seed=_optional_int(body, "seed"),
        temperature=_temperature(body.get("temperature")),
        stream=_bool(body, "stream"),
        include_usage=_include_usage(body),
    )


def _model(body: dict[str, Any]) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("'model' is required and must be a non-empty string", param="model")
    return model


def _max_tokens(body: dict[str, Any], default: int | None = None) -> int | None:
    for name in ("max_completion_tokens", "max_tokens"):
        value = body.get(name)
        if value is None:
            continue
        if not _is_int(value) or value < 0:
            raise BadRequest(f"'{name}' must be a non-negative integer", param=name)
        return int(value)
    return default


def _is_token_ids(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(_is_int(token) for token in value)


def _token_text(tokens: list[int]) -> str:
    """Token ids as text: the simulator has no vocabulary to decode them with."""
    return " ".join(str(token) for token in tokens)


def _ollama_generate_prompt(body: dict[str, Any]) -> str:
    prompt = body.get("prompt") or ""
    system = body.get("system") or ""
    if not isinstance(prompt, str) or not isinstance(system, str):
        raise BadRequest("'prompt' and 'system' must be strings", param="prompt")
    if body.get("raw"):
        return prompt
    messages = [{"role": "system", "content": system}] if system else []
    return render_chat([*messages, {"role": "user", "content": prompt}])


def _stop(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    raise BadRequest("'stop' must be a string or an array of strings", param="stop")


def _temperature(value: Any) -> float:
    if value is None:
        return 1.0
    if not _is_number(value) or not 0 <= value <= 2:
        raise BadRequest("'temperature' must be a number between 0 and 2", param="temperature")
    return float(value)


def _optional_int(body: dict[str, Any], name: str) -> int | None:
    value = body.get(name)
    if value is not None and not _is_int(value):
        raise BadRequest(f"'{name}' must be an integer", param=name)
    return value


def _bool(body: dict[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise BadRequest(f"'{name}' must be a boolean", param=name)
    return value


def _include_usage(body: dict[str, Any]) -> bool:
    options = body.get("stream_options")
    if options is None:
        return False
    if not isinstance(options, dict):
        raise BadRequest("'stream_options' must be an object", param="stream_options")
    return bool(options.get("include_usage"))


def _logprobs(body: dict[str, Any]) -> int | None:
    """A chat request's `logprobs` and `top_logprobs`: how many alternatives per token, or None."""
    wanted, top = body.get("logprobs"), body.get("top_logprobs")
    if wanted is not None and not isinstance(wanted, bool):
        raise BadRequest("'logprobs' must be a boolean", param="logprobs")
    if top is None:
        return 0 if wanted else None
    if not _is_int(top) or not 0 <= top <= MAX_TOP_LOGPROBS:
        raise BadRequest(
            f"'top_logprobs' must be an integer between 0 and {MAX_TOP_LOGPROBS}",
            param="top_logprobs",
        )
    if not wanted:
        raise BadRequest("'logprobs' must be true when 'top_logprobs' is given", param="logprobs")
    return int(top)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
