"""Decode blocks and retraction of one simulated scheduler (mixed into scheduler.Rank)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Protocol

from .hardware import Gpu, Knobs, LlmSpec, decode_step_seconds
from .kvcache import (
    CLIP_MAX_NEW_TOKENS,
    PrefixCache,
    choose_retracted,
    pending_output,
    ratio_after_retract,
)
from .stats import Accumulator, TokenizerStats
from .workload import Arrivals, Req


class LogSink(Protocol):
    """Receives scheduler events; logs.py renders them in a version's format."""

    def emit(self, at: float, event: str, **fields: object) -> None:
        """Record one event at simulated time `at`."""


class DecodeMixin(ABC):
    """Runs up to --decode-log-interval decode steps at once, retracting when the pool is full.

    The attributes below belong to scheduler.Rank, which owns the state.
    """

    gpu: Gpu
    llm: LlmSpec
    knobs: Knobs
    capacity: int
    now: float
    used: int
    pending_out: int
    ratio: float
    decay: float
    min_ratio: float
    running: list[Req]
    waiting: list[Req]
    chunked: Req | None
    cache: PrefixCache
    arrivals: Arrivals
    stats: Accumulator
    tok: TokenizerStats
    log: LogSink
    steps_since_log: int
    tokens_since_log: int
    retracted_since_log: int
    total_retracted: int
    last_decode_log: float
    last_graph: bool

    @abstractmethod
    def _refresh(self, gen_throughput: float, hit_rate: float) -> None:
        """Rewrite the log-point gauges; the scheduler (`Rank`) that mixes this in defines it."""

    def _decode_block(self) -> None:
        if self.steps_since_log >= self.knobs.decode_log_interval:
            # logged here rather than after the last step: the prefills SGLang would run between
            # decode steps have refilled the pool by now
            self._decode_log()
        steps = max(self.knobs.decode_log_interval - self.steps_since_log, 1)
        if not self.waiting:
            gap = self.arrivals.next_after() - self.now
            if gap < 1.0:
                steps = max(1, min(steps, int(gap / 0.02) + 1))
        lefts = [r.target - r.out for r in self.running]
        free = self.capacity - self.used
        fit = steps
        if _growth(lefts, steps) > free:
            lo, hi = 0, steps
            while lo < hi:
                mid = (lo + hi + 1) // 2
                lo, hi = (mid, hi) if _growth(lefts, mid) <= free else (lo, mid - 1)
            fit = lo
        if fit:
            self._run_decode(fit, lefts)
        if fit < steps and self.capacity - self.used < len(self.running):
            self._retract()

    def _run_decode(self, steps: int, lefts: list[int]) -> None:
        batch = len(self.running)
        seq_sum = self.used - self._chunk_held()
        step = decode_step_seconds(self.gpu, self.llm, self.knobs, batch, seq_sum)
        start, still, tokens, freed, pending = self.now, [], 0, 0, 0
        for req, left in zip(self.running, lefts, strict=True):
            if left <= steps:
                req.out += left
                tokens += left
                freed += req.held
                self._finish(req, start + left * step)
            else:
                req.out += steps
                tokens += steps
                still.append(req)
                pending += min(req.max_new - req.out, CLIP_MAX_NEW_TOKENS)
        self.used += tokens - freed
        self.pending_out = pending
        self.running = still
        self.cache.evict(self.capacity - self.used)
        self.now = start + steps * step
        self.ratio = max(self.ratio - self.decay * steps, self.min_ratio)
        self.steps_since_log += steps
        self.tokens_since_log += tokens
        graph = "decode_cuda_graph" if batch <= self.knobs.cuda_graph_max_bs else "decode_none"
        self.stats.inc("cuda_graph_passes_total", steps, (graph,))
        self.stats.inc("realtime_tokens_total", tokens, ("decode",))
        self.tok.observe("inter_token_latency_seconds", step, (), tokens, tokens * step)
        self.last_graph = graph == "decode_cuda_graph"

    def _chunk_held(self) -> int:
        chunked = self.chunked
        return 0 if chunked is None else chunked.cached + chunked.done_prefill

    def _finish(self, req: Req, at: float) -> None:
        self.cache.finished_tokens += req.held
        self.arrivals.client_returns(at)
        self.tok.finished(req, at)

    def _retract(self) -> None:
        kept, gone = choose_retracted(self.running, self.capacity - self.used)
        self.used -= sum(r.held for r in gone)
        if self.capacity - self.used < len(kept):  # one request outgrows the pool: aborted
            self.used -= sum(r.held for r in kept)
            kept = []
        self.running = kept
        self.pending_out = pending_output(kept)
        old, self.ratio = self.ratio, ratio_after_retract(gone)
        for req in gone:
            req.retracted += 1
            req.queued_at = self.now
        self.waiting[:0] = gone
        self.retracted_since_log += len(gone)
        self.total_retracted += len(gone)
        self.stats.inc("num_retracted_requests_total", len(gone))
        self.stats.inc("num_retracted_input_tokens_total", sum(r.prompt for r in gone))
        self.stats.inc("num_retracted_output_tokens_total", sum(r.out for r in gone))
        self.log.emit(
            self.now,
            "retract",
            count=len(gone),
            old=old,
            new=self.ratio,
            gained=sum(r.held for r in gone),
        )

    def _decode_log(self) -> None:
        elapsed = max(self.now - self.last_decode_log, 1e-9)
        self._refresh(gen_throughput=self.tokens_since_log / elapsed, hit_rate=0.0)
        self.last_decode_log = self.now
        self.steps_since_log = self.tokens_since_log = 0
        self.log.emit(self.now, "decode", rank=self)


def _growth(lefts: list[int], steps: int) -> int:
    """KV tokens the running batch adds over `steps` decode steps."""
    return sum(left if left < steps else steps for left in lefts)
