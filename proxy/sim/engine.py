"""Continuous batching over a paged KV cache: the heart of the simulator.

Each scheduler step admits waiting sequences that fit (FIFO, iteration-level scheduling), gives
every running sequence its share of the step's token budget (decodes first, then chunked prefill
of prompt tokens the prefix cache did not have), takes `profile.step_ms(...)` of simulated time,
then applies the results: computed blocks become cached, each sequence that finished its prefill
or decoded emits one token, and finished or aborted sequences free their blocks.

`schedule()` and `complete()` are plain methods with no waiting in them, so tests drive the model
step by step; `run()` is the only place that sleeps.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from proxy.errors import Overloaded
from proxy.sim.kvcache import Block, BlockPool, chain_hashes
from proxy.sim.profile import EngineProfile
from proxy.sim.stats import EngineStats
from proxy.sim.tokens import OutputPlan

_ids = itertools.count()


@dataclass(eq=False)
class Sequence:
    prompt: list[str]
    output: OutputPlan
    arrival: float
    streaming: bool = False
    prefill_only: bool = False
    id: int = field(default_factory=lambda: next(_ids))
    state: str = "waiting"  # waiting | running | finished
    finish_reason: str | None = None
    blocks: list[Block] = field(default_factory=list)
    hashes: list[int] = field(default_factory=list)
    committed: int = 0  # leading blocks already offered to the prefix cache
    computed: int = 0  # context tokens whose KV is computed
    generated: int = 0
    cached_tokens: int = 0
    counted: bool = False  # its prompt is in the stats (admitted once already)
    first_token_at: float | None = None
    finished_at: float | None = None
    aborted: bool = False
    progress: asyncio.Event = field(default_factory=asyncio.Event)
    done: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def context_len(self) -> int:
        return len(self.prompt) + self.generated

    def context(self) -> list[str]:
        return self.prompt + list(self.output.tokens[: self.generated])

    @property
    def ended(self) -> bool:
        return self.state == "finished"


@dataclass(frozen=True)
class StepPlan:
    work: tuple[tuple[Sequence, int], ...]  # each scheduled sequence and its token count
    duration_ms: float


class Engine:
    def __init__(
        self, profile: EngineProfile, clock: Callable[[], float], name: str = "engine"
    ) -> None:
        self.profile = profile
        self.name = name
        self.clock = clock
        self.pool = BlockPool(profile.num_blocks)
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.stats = EngineStats()
        self._wake = asyncio.Event()

    # -- the outside world -------------------------------------------------------------------

    def submit(self, seq: Sequence) -> None:
        limit = self.profile.max_waiting
        if limit is not None and len(self.waiting) >= limit:
            raise Overloaded(f"server busy: {len(self.waiting)} requests already waiting")
        seq.hashes = chain_hashes(seq.prompt, self.profile.block_size)
        self.stats.requests_received += 1
        self.waiting.append(seq)
        self._wake.set()

    def abort(self, seq: Sequence) -> None:
        """The client went away: the sequence leaves at the next step and frees its blocks."""
        if not seq.ended:
            seq.aborted = True
            self._wake.set()

    def fits(self, prompt_tokens: int, output_tokens: int) -> bool:
        limit = min(self.profile.max_model_len, self.profile.kv_tokens)
        return prompt_tokens + output_tokens <= limit

    async def run(self) -> None:
        while True:
            if not self.waiting and not self.running:
                self._wake.clear()
                await self._wake.wait()
            start = self.clock()
            plan = self.schedule()
            if plan.duration_ms > 0:
                await asyncio.sleep(max(0.0, start + plan.duration_ms / 1000 - self.clock()))
            elif not plan.work:
                # Nothing runnable (only aborted sequences left): wait for news.
                self._wake.clear()
                await self._wake.wait()
            else:
                await asyncio.sleep(0)
            self.complete(plan)

    # -- one step, in two halves -------------------------------------------------------------

    def schedule(self) -> StepPlan:
        """Running sequences first (as vLLM V1), then newcomers with what budget is left."""
        self._drop_aborted()
        preemptions = self.stats.preemptions
        work, budget = self._schedule_running(self.profile.max_batched_tokens)
        if self.stats.preemptions == preemptions:  # no room was short: admit newcomers
            work += self._schedule_waiting(budget)
        decodes = sum(1 for seq, n in work if seq.first_token_at is not None and n == 1)
        tokens = sum(n for _, n in work)
        duration = self.profile.step_ms(len(work), tokens - decodes)
        self.stats.steps += 1
        return StepPlan(tuple(work), duration)

    def complete(self, plan: StepPlan) -> None:
        now = self.clock()
        for seq, tokens in plan.work:
            if seq.aborted or seq.state != "running":
                continue
            seq.computed += tokens
            if seq.first_token_at is None:
                self.stats.prefill_tokens_computed += tokens
            self._commit_full_blocks(seq)
            if seq.computed == seq.context_len:
                self._emit(seq, now)

    # -- scheduling --------------------------------------------------------------------------

    def _drop_aborted(self) -> None:
        aborted = [seq for seq in (*self.waiting, *self.running) if seq.aborted]
        if not aborted:
            return
        self.waiting = deque(seq for seq in self.waiting if not seq.aborted)
        self.running = [seq for seq in self.running if not seq.aborted]
        now = self.clock()
        for seq in aborted:
            self.pool.release(seq.blocks)
            seq.blocks = []
            self._finish(seq, "abort", now)

    def _schedule_running(self, budget: int) -> tuple[list[tuple[Sequence, int]], int]:
        work: list[tuple[Sequence, int]] = []
        decoding = [s for s in self.running if s.context_len - s.computed == 1]
        prefilling = [s for s in self.running if s.context_len - s.computed > 1]
        for seq in decoding + prefilling:
            if budget == 0:
                break
            if seq.state != "running":
                continue  # preempted earlier in this loop
            tokens = min(seq.context_len - seq.computed, budget)
            if not self._reserve(seq, seq.computed + tokens):
                continue
            work.append((seq, tokens))
            budget -= tokens
            self._commit_full_blocks(seq, seq.computed + tokens)
        # A sequence scheduled early in the loop may have been preempted to make room later.
        kept = [(seq, tokens) for seq, tokens in work if seq.state == "running"]
        return kept, budget + sum(n for seq, n in work if seq.state != "running")

    def _schedule_waiting(self, budget: int) -> list[tuple[Sequence, int]]:
        work: list[tuple[Sequence, int]] = []
        while budget > 0 and self.waiting and len(self.running) < self.profile.max_seqs:
            seq = self.waiting[0]
            if not self._admit(seq):
                break  # head-of-line: later requests wait too, as in vLLM
            tokens = min(seq.context_len - seq.computed, budget)
            work.append((seq, tokens))
            budget -= tokens
            # vLLM V1 caches a block as soon as it is scheduled, so a newcomer later in this
            # same step already finds it: a burst sharing a prefix computes it once.
            self._commit_full_blocks(seq, seq.computed + tokens)
        return work

    def _admit(self, seq: Sequence) -> bool:
        """Give `seq` its cached prefix and blocks for the rest of its context, if they fit."""
        block_size = self.profile.block_size
        context_len = seq.context_len
        # At least one token is always computed, so a fully cached prompt still runs once.
        usable = (context_len - 1) // block_size
        hits = self.pool.match_prefix(seq.hashes[:usable])
        needed = -(-context_len // block_size) - len(hits)
        if not self.pool.can_allocate(hits, needed):
            return False
        self.waiting.popleft()
        self.pool.hold(hits)
        seq.blocks = hits + self.pool.allocate(needed)
        seq.computed = len(hits) * block_size
        seq.committed = len(hits)
        seq.state = "running"
        self.running.append(seq)
        if not seq.counted:  # a preempted sequence coming back is not a new prompt
            seq.counted = True
            seq.cached_tokens = seq.computed
            self.stats.prompt_tokens += len(seq.prompt)
            self.stats.prefix_queries += len(seq.prompt)
            self.stats.prefix_hits += seq.computed
        return True

    def _reserve(self, seq: Sequence, tokens: int) -> bool:
        """Make room for `tokens` of KV, preempting the newest sequences if the cache is full."""
        needed = -(-tokens // self.profile.block_size) - len(seq.blocks)
        while needed > 0 and self.pool.free_blocks < needed:
            victim = self.running[-1]
            self._preempt(victim)
            if victim is seq:
                return False
        if needed > 0:
            seq.blocks += self.pool.allocate(needed)
        return True

    def _preempt(self, seq: Sequence) -> None:
        """vLLM's recompute preemption: drop the KV, requeue first, prefill it all again later."""
        self.running.remove(seq)
        self.pool.release(seq.blocks)
        seq.blocks = []
        seq.computed = seq.committed = 0
        seq.hashes = chain_hashes(seq.context(), self.profile.block_size)
        seq.state = "waiting"
        self.waiting.appendleft(seq)
        self.stats.preemptions += 1

    # -- completing --------------------------------------------------------------------------

    def _commit_full_blocks(self, seq: Sequence, upto: int | None = None) -> None:
        """Key the sequence's full blocks (up to `upto` tokens, by default those computed)."""
        block_size = self.profile.block_size
        full = min(seq.computed if upto is None else upto, seq.context_len) // block_size
        if full <= seq.committed:
            return
        if len(seq.hashes) < full:
            seq.hashes = chain_hashes(seq.context(), block_size)
        for i in range(seq.committed, full):
            self.pool.commit(seq.blocks[i], seq.hashes[i])
        seq.committed = full

    def _emit(self, seq: Sequence, now: float) -> None:
        if seq.generated < len(seq.output.tokens) and not seq.prefill_only:
            seq.generated += 1
            self.stats.generation_tokens += 1
            if seq.first_token_at is None:
                seq.first_token_at = now
                self.stats.ttft.observe(now - seq.arrival)
            if seq.streaming:
                seq.progress.set()
        if seq.prefill_only or seq.generated >= len(seq.output.tokens):
            self.running.remove(seq)
            self.pool.release(seq.blocks)
            seq.blocks = []
            self._finish(seq, seq.output.finish_reason, now)

    def _finish(self, seq: Sequence, reason: str, now: float) -> None:
        seq.state = "finished"
        seq.finish_reason = reason
        seq.finished_at = now
        self.stats.finished[reason] += 1
        if reason != "abort":
            self.stats.e2e.observe(now - seq.arrival)
        seq.progress.set()
        seq.done.set()
