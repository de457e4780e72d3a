"""One simulated SGLang scheduler (one DP rank): admission, chunked prefill, decode, retraction."""

from __future__ import annotations

import random

from .decode import DecodeMixin, LogSink
from .hardware import (
    Gpu,
    Knobs,
    LlmSpec,
    MemoryPlan,
    activation_gb,
    prefill_seconds,
)
from .kvcache import (
    CLIP_MAX_NEW_TOKENS,
    PrefixCache,
)
from .stats import Accumulator, TokenizerStats
from .workload import Arrivals, Load, Req

# SGLang's environment defaults (environ.py) for admission and retraction.
INIT_RATIO, MIN_RATIO_FACTOR, DECAY_STEPS = 0.7, 0.14, 600
LPM_FALLBACK_QUEUE = 128
IDLE_LOG_SECONDS = 30.0
MAX_PREFILLS_PER_EVENT = 16
NAN = float("nan")  # one object, so equal states compare equal


class Rank(DecodeMixin):
    """Scheduler state of one DP rank; `step()` runs the next prefill batch or decode block."""

    def __init__(
        self,
        hw: tuple[Gpu, LlmSpec, Knobs, MemoryPlan],
        load: Load,
        lpm_fallback: bool,
        rng: random.Random,
        start: float,
        tok: TokenizerStats,
        log: LogSink,
    ) -> None:
        self.gpu, self.llm, self.knobs, self.plan = hw
        self.capacity = self.plan.max_total_num_tokens
        self.rng, self.tok, self.log, self.lpm_fallback = rng, tok, log, lpm_fallback
        share = 1 / self.knobs.dp_size
        self.arrivals = Arrivals(load, rng, share, start)
        self.arrivals.returning = [start + i * 0.002 for i in range(int(load.clients * share))]
        self.now = self.last_log = self.last_decode_log = start
        self.waiting: list[Req] = []
        self.running: list[Req] = []
        self.chunked: Req | None = None
        self.used = 0
        self.pending_out = 0  # pending_output(running), kept up to date incrementally
        self.cache = PrefixCache()
        self.init_ratio = min(INIT_RATIO * self.knobs.schedule_conservativeness, 1.0)
        self.min_ratio = min(self.init_ratio * MIN_RATIO_FACTOR, 1.0)
        self.decay = (self.init_ratio - self.min_ratio) / DECAY_STEPS
        self.ratio = self.init_ratio
        self.stats = Accumulator()
        self.gauges: dict[str, float] = {}
        self.steps_since_log = self.tokens_since_log = self.retracted_since_log = 0
        self.total_retracted = 0
        self.crashed = False
        self.index = 0
        self.last_graph = True
        self._refresh(gen_throughput=0.0, hit_rate=0.0)

    def step(self) -> None:
        """Advance this scheduler by one event."""
        self.waiting.extend(self.arrivals.due(self.now))
        prefilled = 0
        # SGLang runs a new prefill batch whenever one fits, before the next decode step.
        while (self.waiting or self.chunked) and prefilled < MAX_PREFILLS_PER_EVENT:
            if not self._prefill() or self.crashed:
                break
            prefilled += 1
            self.waiting.extend(self.arrivals.due(self.now))
        if prefilled or self.crashed:
            return
        if self.running:
            self._decode_block()
        elif self.waiting:
            self.waiting.pop(0)  # larger than the whole pool: SGLang aborts it
        else:
            self._idle()

    def next_time(self) -> float:
        """When this scheduler next has something to do."""
        if self.waiting or self.running or self.chunked:
            return self.now
        return max(self.now, min(self.arrivals.next_after(), self.last_log + IDLE_LOG_SECONDS))

    def _idle(self) -> None:
        wake = min(self.arrivals.next_after(), self.last_log + IDLE_LOG_SECONDS)
        self.now = max(self.now, wake)
        if self.now >= self.last_log + IDLE_LOG_SECONDS:
            self.ratio = self.init_ratio
            self._refresh(gen_throughput=0.0, hit_rate=self.gauges.get("cache_hit_rate", 0.0))

    # -- admission and prefill ------------------------------------------------------------
    def _reserved(self) -> float:
        return self.pending_out * self.ratio

    def _candidates(self) -> list[Req]:
        lpm = self.knobs.schedule_policy == "lpm"
        if not lpm or (self.lpm_fallback and len(self.waiting) > LPM_FALLBACK_QUEUE):
            return self.waiting
        return sorted(self.waiting, key=lambda r: -self.cache.hit(r.group))

    def _prefill(self) -> bool:
        knobs = self.knobs
        budget = self.capacity - self.used - self._reserved()
        chunk = knobs.chunked_prefill_size if knobs.chunked_prefill_size > 0 else 1 << 30
        rem = min(chunk, knobs.max_prefill_tokens) if self.chunked is None else chunk
        batch: list[tuple[Req, int, int]] = []
        if self.chunked is not None:
            req = self.chunked
            take = min(req.prompt + req.out - req.cached - req.done_prefill, rem)
            batch.append((req, take, 0))
            rem -= take
        slots = self.plan.max_running_requests - len(self.running)
        ordered = self._candidates()
        for req in ordered if rem > 0 else ():
            if slots <= len(batch):
                break
            cached = self.cache.hit(req.group)
            extend = req.prompt + req.out - cached
            need = extend + min(req.max_new - req.out, CLIP_MAX_NEW_TOKENS) * self.ratio
            if need > budget or (extend > rem and batch):
                break
            req.cached = cached
            batch.append((req, min(extend, rem), cached))
            budget -= need
            rem -= min(extend, rem)
        if not batch:
            return False
        self._run_prefill(batch, ordered)
        return True

    def _run_prefill(self, batch: list[tuple[Req, int, int]], ordered: list[Req]) -> None:
        tokens = sum(b[1] for b in batch)
        cached = sum(b[2] for b in batch)
        # allocator fragmentation makes the peak a little worse than the estimate, now and then
        noise = 1 + 0.1 * self.rng.expovariate(1.0)
        need_gb = activation_gb(self.llm, self.knobs, tokens) * noise
        if need_gb > self.plan.available_gb:
            self.crashed = True
            self.log.emit(
                self.now,
                "oom",
                tokens=tokens,
                need_gb=need_gb,
                free_gb=max(self.plan.available_gb, 0.0),
            )
            return
        start = self.now
        cost = prefill_seconds(self.gpu, self.llm, self.knobs, tokens, cached)
        if ordered is not self.waiting:  # lpm sorts the whole queue on every schedule
            cost += 3e-6 * len(self.waiting) * max(len(self.waiting).bit_length(), 1)
        self.now += cost
        fresh = [b[0] for b in batch if b[0] is not self.chunked]
        if ordered is self.waiting:  # fcfs: the admitted requests are the head of the queue
            del self.waiting[: len(fresh)]
        else:
            admitted = {id(r) for r in fresh}
            self.waiting = [r for r in self.waiting if id(r) not in admitted]
        for req, take, hit in batch:
            self._admit(req, take, hit, start)
        self.stats.inc("realtime_tokens_total", tokens, ("prefill_compute",))
        self.stats.inc("realtime_tokens_total", cached, ("prefill_cache",))
        self.stats.inc("cuda_graph_passes_total", 1, ("prefill_none",))
        self.cache.evict(self.capacity - self.used)
        self._refresh(
            gen_throughput=self.gauges.get("gen_throughput", 0.0),
            hit_rate=cached / max(tokens + cached, 1),
        )
        self.log.emit(self.now, "prefill", seqs=len(batch), tokens=tokens, cached=cached, rank=self)

    def _admit(self, req: Req, take: int, hit: int, start: float) -> None:
        if req.done_prefill == 0 and req is not self.chunked:
            self.stats.observe("queue_time_seconds", start - req.queued_at)
            self.stats.observe("per_stage_req_latency_seconds", 0.002, ("request_process",))
            self.used += hit
            self.cache.touch(req.group, self.arrivals.load.prefix_len)
        req.done_prefill += take
        self.used += take
        if req.done_prefill + req.cached < req.prompt + req.out:
            self.chunked = req
            self.stats.observe(
                "per_stage_req_latency_seconds", self.now - start, ("chunked_prefill",)
            )
            return
        self.chunked = None if req is self.chunked else self.chunked
        self.stats.observe("per_stage_req_latency_seconds", self.now - start, ("prefill_forward",))
        req.done_prefill = 0
        self.running.append(req)
        if req.first_token < 0:
            req.first_token = self.now
            req.out += 1
            self.used += 1
            self.tok.observe(
                "time_to_first_token_seconds", self.now - req.arrival, (str(req.streaming).lower(),)
            )
        self.pending_out += min(req.max_new - req.out, CLIP_MAX_NEW_TOKENS)

    def _refresh(self, gen_throughput: float, hit_rate: float) -> None:
        """A log point: SGLang rewrites every scheduler gauge from the current state."""
        cap = self.capacity
        evictable = self.cache.evictable(cap - self.used)
        self.gauges = {
            "num_running_reqs": len(self.running),
            "num_queue_reqs": len(self.waiting),
            "num_used_tokens": self.used,
            "token_usage": round(self.used / cap, 2),
            "full_token_usage": self.used / cap,
            "gen_throughput": gen_throughput,
            "cache_hit_rate": hit_rate,
            "kv_used_tokens": self.used,
            "kv_evictable_tokens": evictable,
            "kv_available_tokens": cap - self.used - evictable,
            "decode_sum_seq_lens": self.used - self._chunk_held(),
            "new_token_ratio": self.ratio,
            "num_retracted_reqs": self.retracted_since_log,
            "total_retracted_reqs": self.total_retracted,
            "fwd_occupancy": NAN,
        }
        self.retracted_since_log = 0
        self.last_log = self.now
