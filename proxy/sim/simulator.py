"""One simulated server: its personality, engines, faults, limits and request log.

Request handling is split in two: `admit` runs before the response starts (so unknown models,
injected errors and rate limits become ordinary error responses), `start` runs inside the response
(so delays, hangs and cold loads can be interrupted by the client going away).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from proxy.errors import APIError, BadRequest, InternalError, Overloaded, RateLimited
from proxy.sim.engine import Engine, Sequence
from proxy.sim.faults import Faults
from proxy.sim.limits import RequestRateLimit
from proxy.sim.models import ModelHost, unknown_model
from proxy.sim.profile import EngineProfile, Personality
from proxy.sim.recorder import RequestLog
from proxy.sim.requests import GenerationRequest
from proxy.sim.tokens import (
    OutputPlan,
    natural_length,
    plan_call,
    plan_output,
    request_seed,
    tokenize,
)


class ContextTooLong(BadRequest):
    code = "context_length_exceeded"


@dataclass
class Simulator:
    personality: Personality
    profile: EngineProfile
    host: ModelHost
    clock: Callable[[], float]
    rng: random.Random
    faults: Faults = field(default_factory=Faults)
    log: RequestLog | None = None
    rate_limit: RequestRateLimit | None = None
    disconnects: int = 0
    listener_outages: int = 0

    def admit(self, path: str, headers: dict[str, str], body: Any, model: str) -> None:
        """Checks made before the response starts; each raises the error the client sees."""
        if self.log is not None:
            self.log.record(self.clock(), path, headers, body)
        if model not in self.host.names:
            raise unknown_model(model, self.host.names)
        if self.rate_limit is not None:
            wait = self.rate_limit.try_acquire(self.clock())
            if wait is not None:
                raise RateLimited(
                    f"Rate limit reached for {model}: {self.rate_limit.per_minute} requests "
                    f"per minute. Please try again in {wait:.1f}s.",
                    retry_after=wait,
                )
        self._inject(self.faults.draw(self.rng))

    def _inject(self, verdict: str) -> None:
        said = f" {self.faults.error_text}" if self.faults.error_text else ""
        if verdict == "rate_limit":
            raise RateLimited(
                f"simulated rate limit (fault injection){said}",
                retry_after=self.faults.retry_after_s,
            )
        if verdict == "error":
            error: APIError
            if self.faults.error_status == 500:
                error = InternalError(f"simulated engine failure (fault injection){said}")
            else:
                error = Overloaded(f"simulated overload (fault injection){said}")
                error.status = self.faults.error_status
            raise error

    async def start(
        self, requests: tuple[GenerationRequest, ...], streaming: bool
    ) -> tuple[Engine, tuple[Sequence, ...]]:
        """Wait out injected delays, get the model's engine (loading it if need be), submit.

        A batch (one request per prompt, same model) is submitted together, one sequence per
        prompt, as if a client had sent the prompts at once: each queues, batches and finds
        the prefix cache on its own.
        """
        model, keep_alive = requests[0].model, requests[0].keep_alive_s
        delay = self.faults.delay_s + self.profile.network_latency_ms / 1000
        if delay:
            await asyncio.sleep(delay)
        engine = await self.host.acquire(model, keep_alive)
        seqs: tuple[Sequence, ...] = ()
        try:
            seqs = self.sequences(requests, engine, streaming)
            for seq in seqs:
                engine.submit(seq)
        except BaseException:
            for seq in seqs:
                engine.abort(seq)  # those already queued leave; a full queue refuses them all
            self.host.release(model)
            raise
        return engine, seqs

    def sequences(
        self, requests: tuple[GenerationRequest, ...], engine: Engine, streaming: bool
    ) -> tuple[Sequence, ...]:
        """Every request's sequence (each checked against the context first), sharing one
        progress event, so a stream of several choices wakes on any choice's token."""
        seqs = tuple(self.sequence(request, engine, streaming) for request in requests)
        progress = asyncio.Event()
        for seq in seqs:
            seq.progress = progress
        return seqs

    def sequence(self, request: GenerationRequest, engine: Engine, streaming: bool) -> Sequence:
        prompt = tokenize(request.prompt)
        room = min(self.profile.max_model_len, self.profile.kv_tokens) - len(prompt)
        wanted = request.max_tokens or 0
        if room < max(wanted, 1):
            raise ContextTooLong(
                f"This model's maximum context length is {self.profile.max_model_len} tokens. "
                f"However, you requested {len(prompt) + wanted} tokens ({len(prompt)} in the "
                f"messages, {wanted} in the completion). Please reduce the length of the "
                "messages or completion.",
                param="messages",
            )
        output = self._output(request, room)
        return Sequence(prompt, output, arrival=self.clock(), streaming=streaming)

    def _output(self, request: GenerationRequest, room: int) -> OutputPlan:
        """What the answer will be: a tool call (whatever the profile), an echo, or words."""
        if request.call is not None:
            cap = room if request.max_tokens is None else min(request.max_tokens, room)
            return plan_call(request.call, cap)
        seed = request_seed(request.model, request.prompt, request.seed, request.temperature)
        natural = natural_length(seed, self.profile.output_tokens, self.profile.output_distribution)
        limit = request.max_tokens
        if limit is not None and not request.fills_max_tokens and natural <= limit:
            limit = None  # a natural answer that fits under the cap ends by itself
        if limit is None and natural > room:
            limit = room  # an answer that would overflow the context is cut: finish "length"
        if self.profile.output_distribution == "echo":
            said = tuple(tokenize(request.echo)[:limit] if limit else tokenize(request.echo))
            return OutputPlan(said or (" ",), "stop")
        return plan_output(seed, limit, natural, request.stop)

    def embedding_sequences(self, engine: Engine, texts: tuple[str, ...]) -> list[Sequence]:
        seqs = []
        for text in texts:
            prompt = tokenize(text) or [" "]
            if not engine.fits(len(prompt), 0):
                raise ContextTooLong(
                    f"input has {len(prompt)} tokens, more than the model's maximum context "
                    f"length of {self.profile.max_model_len}",
                    param="input",
                )
            output = plan_output(0, 0, 0)
            seqs.append(Sequence(prompt, output, arrival=self.clock(), prefill_only=True))
        return seqs
