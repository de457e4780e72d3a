"""Decode blocks and retraction of one simulated scheduler (mixed into scheduler.Rank)."""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from typing import Protocol

from .hardware import Knobs, MemoryPlan
from .kvcache import (
    CLIP_MAX_NEW_TOKENS,
    PrefixCache,
    SchedulerRules,
    choose_retracted,
    pending_output,
    ratio_after_retract,
)
from .physics import Engine
from .stats import Accumulator, TokenizerStats
from .workload import Arrivals, Req

# Decode steps simulated at least between two admissions while requests wait. SGLang retries
# admission on every iteration of its event loop, before each decode step (1: exact); a block
# still ends early at the first finished request, and, with nothing waiting, at the first
# finished request of a closed loop (its client sends again at once) or after the step the next
# known arrival comes in. Larger values trade fidelity for CPU: 8 bunched
# the admissions of the requests that left during a block, ITL p99 31.5 % high at the median
# (bench/sim_granularity.py), for 1/1.66 of the CPU.
MIN_DECODE_BLOCK = 1


class LogSink(Protocol):
    """Receives scheduler events; logs.py renders them in a version's format."""

    def emit(self, at: float, event: str, **fields: object) -> None:
        """Record one event at simulated time `at`."""


class DecodeMixin(ABC):
    """Runs up to --decode-log-interval decode steps at once, retracting when the pool is full.

    The attributes below belong to scheduler.Rank, which owns the state.
    """

    engine: Engine
    plan: MemoryPlan
    knobs: Knobs
    rules: SchedulerRules
    rng: random.Random
    capacity: int
    now: float
    used: int
    running_shared: int
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
    paused: float
    crashed: str | None
    crash_fields: dict[str, float]

    @abstractmethod
    def _refresh(self, gen_throughput: float, hit_rate: float) -> None:
        """Rewrite the log-point gauges; the scheduler (`Rank`) that mixes this in defines it."""

    def _decode_block(self) -> None:
        if self.steps_since_log >= self.knobs.decode_log_interval:
            self._decode_log()
        steps = max(self.knobs.decode_log_interval - self.steps_since_log, 1)
        lefts = [r.target - r.out for r in self.running]
        if self.waiting or self.arrivals.clients:
            # requests wait, or (a closed loop) the first to finish has its client send again
            # at once: SGLang admits it on the next iteration of its event loop
            steps = min(steps, max(min(lefts), MIN_DECODE_BLOCK))
        if not self.waiting:
            gap = self.arrivals.next_after() - self.now
            if gap < float("inf"):  # the next known arrival is admitted after the step it comes in
                step = self.engine.decode_seconds(len(self.running), self._seq_sum())
                steps = max(1, min(steps, int(gap / step) + 1))
        free = self.capacity - self.used
        fit = steps
        if _growth(lefts, steps) > free:
            lo, hi = 0, steps
            while lo < hi:
                mid = (lo + hi + 1) // 2
                lo, hi = (mid, hi) if _growth(lefts, mid) <= free else (lo, mid - 1)
            fit = lo
        if fit and not self._decode_oom():
            self._run_decode(fit, lefts)
        if not self.crashed and fit < steps and self.capacity - self.used < len(self.running):
            self._retract()  # check_decode_mem failed: the next step does not fit

    def _decode_oom(self) -> bool:
        """An eager decode batch allocates its activations; too little free memory is an OOM."""
        batch = len(self.running)
        if self.engine.graph_size(batch):
            return False
        need = self.engine.eager_decode_gb(batch) * (1 + 0.1 * self.rng.expovariate(1.0))
        if need <= self.plan.available_gb:
            return False
        self.crashed = "decode_oom"
        self.crash_fields = {"tokens": batch, "need_gb": need}
        return True

    def _run_decode(self, steps: int, lefts: list[int]) -> None:
        batch = len(self.running)
        seq_sum = self._seq_sum()
        step = self.engine.decode_seconds(batch, seq_sum)
        start, still, tokens, pending = self.now, [], 0, 0
        for req, left in zip(self.running, lefts, strict=True):
            if left <= steps:
                req.out += left
                tokens += left
                self.used += left
                self._finish(req, start + left * step)
            else:
                req.out += steps
                tokens += steps
                self.used += steps
                still.append(req)
                pending += min(req.max_new - req.out, CLIP_MAX_NEW_TOKENS)
        self.pending_out = pending
        self.running = still
        self._evict()
        self.now = start + steps * step
        self.ratio = max(self.ratio - self.decay * steps, self.min_ratio)
        self.steps_since_log += steps
        self.tokens_since_log += tokens
        graph = "decode_cuda_graph" if self.engine.graph_size(batch) else "decode_none"
        self.stats.inc("cuda_graph_passes_total", steps, (graph,))
        self.stats.inc("realtime_tokens_total", tokens, ("decode",))
        # the first step after a prefill also waited for it (a prefill forward pauses decode)
        first = min(batch, tokens)
        self.tok.observe("inter_token_latency_seconds", step + self.paused, (), first)
        if tokens > first:
            self.tok.observe("inter_token_latency_seconds", step, (), tokens - first)
        self.paused = 0.0
        self.last_graph = graph == "decode_cuda_graph"

    def _evict(self) -> None:
        """Trim the radix cache to the pool's free part, counting the tokens it evicts."""
        evicted = self.cache.evict(self.capacity - self.used)
        if evicted:  # SGLang touches the counter's series only when a pass evicts something
            self.stats.inc("evicted_tokens_total", evicted)

    def _seq_sum(self) -> int:
        """KV tokens the running requests' attention reads (a shared prefix once per request):
        used, less the chunked request's own part and the locked prefixes, plus each running
        request's shared prefix (O(1); tests check it against the sum over requests)."""
        chunked, chunk_own = self.chunked, 0
        if chunked is not None:
            chunk_own = max(chunked.cached + chunked.done_prefill - chunked.shared, 0)
        return self.used - chunk_own - self.cache.locked_tokens + self.running_shared

    def _finish(self, req: Req, at: float) -> None:
        self.cache.finished(req.own)
        self._drop(req)
        self.arrivals.client_returns(at)
        self.tok.finished(req, at)

    def _drop(self, req: Req) -> None:
        """Give back a request's pool tokens: its own part, and its lock on a shared prefix."""
        self.used -= req.own
        if req.shared:
            self.used -= self.cache.release(req.group)
            self.running_shared -= req.shared
            req.shared = 0

    def _retract(self) -> None:
        """Scheduler.update_running_batch -> ScheduleBatch.retract_decode; no decay this step."""
        free = self.capacity - self.used
        kept, gone = choose_retracted(self.running, free, self.rules.retract_room_steps)
        if not gone:  # one request outgrows the whole pool: SGLang aborts it
            self._drop(kept[0])
            self.arrivals.client_returns(self.now)
            self.running, self.pending_out = [], 0
            return
        gained = sum(r.own for r in gone)
        for req in gone:
            self._drop(req)
        self.running = kept
        self.pending_out = pending_output(kept)
        old, self.ratio = self.ratio, ratio_after_retract(kept, self.rules.ratio_plus_one)
        for req in gone:
            req.retracted += 1
            req.queued_at = self.now
        self.waiting.extend(gone)  # _add_request_to_queue(is_retracted=True): the queue's end
        self.retracted_since_log += len(gone)
        self.total_retracted += len(gone)
        self.stats.inc("num_retracted_requests_total", len(gone))
        self.stats.inc("num_retracted_input_tokens_total", sum(r.prompt for r in gone))
        self.stats.inc("num_retracted_output_tokens_total", sum(r.out for r in gone))
        self.log.emit(self.now, "retract", count=len(gone), old=old, new=self.ratio, gained=gained)

    def _decode_log(self) -> None:
        elapsed = max(self.now - self.last_decode_log, 1e-9)
        # log_decode_stats: decode tokens over wall time since the last decode log (prefill incl.)
        self._refresh(gen_throughput=self.tokens_since_log / elapsed, hit_rate=0.0)
        self.last_decode_log = self.now
        self.steps_since_log = self.tokens_since_log = 0
        self.log.emit(self.now, "decode", rank=self)


def _growth(lefts: list[int], steps: int) -> int:
    """KV tokens the running batch adds over `steps` decode steps."""
    return sum(left if left < steps else steps for left in lefts)
