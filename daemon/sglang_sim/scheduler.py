"""One simulated SGLang scheduler (one DP rank): admission, chunked prefill, decode, retraction."""

from __future__ import annotations

import random

from .catalogue import Version
from .decode import DecodeMixin, LogSink
from .hardware import MemoryPlan
from .kvcache import CLIP_MAX_NEW_TOKENS, PrefixCache, ratio_bounds, rules_for
from .physics import Engine
from .stats import Accumulator, TokenizerStats
from .workload import Arrivals, Load, Req

# SchedulePolicy._determine_active_policy: lpm falls back to fcfs above 128 waiting requests
# (WAITING_QUEUE_PREFIX_MATCH_MAX in 0.5.23; the literal 128 in 0.4.10 and 0.5.9).
LPM_FALLBACK_QUEUE = 128
IDLE_LOG_SECONDS = 30.0
MAX_PREFILLS_PER_EVENT = 16
LPM_SORT_SECONDS_PER_REQ = 3e-6  # prefix match + sort per waiting request and schedule
NAN = float("nan")  # one object, so equal states compare equal


class Rank(DecodeMixin):
    """Scheduler state of one DP rank; `step()` runs the next prefill batch or decode block."""

    def __init__(
        self,
        engine: Engine,
        plan: MemoryPlan,
        version: Version,
        load: Load,
        rng: random.Random,
        start: float,
        tok: TokenizerStats,
        log: LogSink,
    ) -> None:
        self.engine, self.plan, self.knobs = engine, plan, engine.knobs
        self.rules = rules_for(version)
        self.capacity = plan.max_total_num_tokens
        self.rng, self.tok, self.log = rng, tok, log
        self.arrivals = Arrivals(load, rng, 1 / self.knobs.dp_size, start)
        self.now = self.last_log = self.last_decode_log = start
        self.waiting: list[Req] = []
        self.running: list[Req] = []
        self.chunked: Req | None = None
        self.used = self.pending_out = 0  # pending_out: pending_output(running), incremental
        self.running_shared = 0  # sum of the running requests' shared prefixes
        self.cache = PrefixCache(enabled=not self.knobs.disable_radix_cache)
        self.init_ratio, self.min_ratio, self.decay = ratio_bounds(
            self.knobs.schedule_conservativeness
        )
        self.ratio = self.init_ratio
        self.stats = Accumulator()
        self.gauges: dict[str, float] = {}
        self.steps_since_log = self.tokens_since_log = self.retracted_since_log = 0
        self.total_retracted = 0
        self.paused = 0.0  # prefill time since the last decode step (delays running requests)
        self.crashed: str | None = None
        self.crash_fields: dict[str, float] = {}
        self.index = 0
        self.last_graph = True
        self._refresh(gen_throughput=0.0, hit_rate=0.0)

    def step(self) -> None:
        """Advance this scheduler by one event (SGLang's event loop: prefill first, then decode)."""
        self.waiting.extend(self.arrivals.due(self.now))
        prefilled = 0
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
        # Scheduler.self_check_during_idle resets new_token_ratio whenever nothing runs
        self.ratio = self.init_ratio
        wake = min(self.arrivals.next_after(), self.last_log + IDLE_LOG_SECONDS)
        self.now = max(self.now, wake)
        if self.now >= self.last_log + IDLE_LOG_SECONDS:
            self._refresh(gen_throughput=0.0, hit_rate=self.gauges.get("cache_hit_rate", 0.0))

    # -- admission and prefill (PrefillAdder, schedule_policy.py) -------------------------
    def _candidates(self) -> list[Req]:
        if self.knobs.schedule_policy != "lpm" or len(self.waiting) > LPM_FALLBACK_QUEUE:
            return self.waiting
        return sorted(self.waiting, key=lambda r: -self.cache.hit(r.group))

    def _charge(self, req: Req) -> int:
        """Tokens a new request reserves for its output (add_one_req)."""
        left = req.max_new - req.out if self.rules.charge_remaining else req.max_new
        return min(left, CLIP_MAX_NEW_TOKENS) + self.rules.page_overhead

    def _prefill(self) -> bool:
        knobs = self.knobs
        # rem_total_tokens: free + evictable - running requests' reservation x new_token_ratio
        budget = self.capacity - self.used - self.pending_out * self.ratio
        chunk = knobs.chunked_prefill_size if knobs.chunked_prefill_size > 0 else 1 << 30
        rem_input, batch = knobs.max_prefill_tokens, []
        if self.chunked is not None:  # add_chunked_req: always continues
            req = self.chunked
            take = min(req.prompt + req.out - req.cached - req.done_prefill, chunk)
            batch.append((req, take, 0))
            chunk, rem_input, budget = chunk - take, rem_input - take, budget - take
        slots = self.plan.max_running_requests - len(self.running)
        ordered = self._candidates()
        for req in ordered if chunk > 0 and budget > 0 else ():
            if len(batch) >= slots:
                break
            cached = self.cache.hit(req.group)
            extend = req.prompt + req.out - cached
            charge = self._charge(req)
            lock = self.cache.lock_cost(req.group)  # an evictable prefix it would lock
            if extend + charge + lock >= budget or (extend >= rem_input and batch):
                break  # NO_TOKEN / OTHER
            req.cached = cached
            take = min(extend, chunk)
            batch.append((req, take, cached))
            budget -= take + lock + (charge if take == extend else 0)
            chunk, rem_input = chunk - take, rem_input - take
            if take < extend or budget <= 0 or chunk <= 0 or rem_input <= 0:
                break
        if not batch:
            return False
        self._run_prefill(batch, ordered)
        return True

    def _run_prefill(self, batch: list[tuple[Req, int, int]], ordered: list[Req]) -> None:
        tokens = sum(b[1] for b in batch)
        cached = sum(b[2] for b in batch)
        need = self.engine.prefill_activation_gb(tokens, len(batch))
        need *= 1 + 0.1 * self.rng.expovariate(1.0)  # allocator fragmentation, now and then
        if need > self.plan.available_gb:
            # SGLang logs the batch in get_new_batch_prefill, before run_batch runs its forward.
            self.log.emit(self.now, "prefill", seqs=len(batch), tokens=tokens, cached=cached,
                          rank=self)  # fmt: skip
            self.crashed = "prefill_oom"
            self.crash_fields = {"tokens": tokens, "need_gb": need}
            return
        start, attention = self.now, 0.0
        for req, take, hit in batch:
            done = hit + req.done_prefill + (req.cached if req is self.chunked else 0)
            attention += self.engine.llm.attention_flops(take, done + take / 2)
        cost = self.engine.prefill_seconds(tokens, attention)
        if ordered is not self.waiting:  # lpm matches and sorts the queue on every schedule
            cost += LPM_SORT_SECONDS_PER_REQ * len(self.waiting)
        self.now += cost
        if self.running:
            self.paused += cost
        self._dequeue([b[0] for b in batch if b[0] is not self.chunked], ordered)
        for req, take, hit in batch:
            self._admit(req, take, hit, start)
        self.stats.inc("realtime_tokens_total", tokens, ("prefill_compute",))
        self.stats.inc("realtime_tokens_total", cached, ("prefill_cache",))
        self.stats.inc("cuda_graph_passes_total", 1, ("prefill_none",))
        self._evict()
        rate = cached / max(tokens + cached, 1)
        self._refresh(gen_throughput=self.gauges.get("gen_throughput", 0.0), hit_rate=rate)
        self.log.emit(self.now, "prefill", seqs=len(batch), tokens=tokens, cached=cached, rank=self)

    def _dequeue(self, fresh: list[Req], ordered: list[Req]) -> None:
        if ordered is self.waiting:  # fcfs: the admitted requests are the head of the queue
            del self.waiting[: len(fresh)]
        else:
            admitted = {id(r) for r in fresh}
            self.waiting = [r for r in self.waiting if id(r) not in admitted]

    def _admit(self, req: Req, take: int, hit: int, start: float) -> None:
        if req.done_prefill == 0 and req is not self.chunked:
            self.stats.observe("queue_time_seconds", start - req.queued_at)
            self.stats.observe("per_stage_req_latency_seconds", 0.002, ("request_process",))
            self._lock_prefix(req, hit)
        start_at = req.cached + req.done_prefill  # position of the chunk's first token
        req.done_prefill += take
        # positions below `shared` are the prefix, charged once to the cache by _lock_prefix
        self.used += take - max(min(req.shared, start_at + take) - start_at, 0)
        stage = "chunked_prefill"
        if req.done_prefill + req.cached < req.prompt + req.out:
            self.chunked = req
        else:
            self.chunked = None if req is self.chunked else self.chunked
            stage = "prefill_forward"
            self._start_decoding(req)
        self.stats.observe("per_stage_req_latency_seconds", self.now - start, (stage,))

    def _lock_prefix(self, req: Req, hit: int) -> None:
        """Lock the request's shared prefix in the radix cache (inserting it on a miss).

        SGLang's tree holds one copy of a prefix, ref-counted by the requests using it
        (RadixCache.inc_lock_ref): the pool pays for it once, not once per request.
        """
        if req.group < 0 or not self.cache.enabled:
            return
        req.shared = hit or self.arrivals.load.prefix_len
        self.used += self.cache.acquire(req.group, req.shared)

    def _start_decoding(self, req: Req) -> None:
        req.done_prefill = 0
        self.running.append(req)
        self.running_shared += req.shared
        if req.first_token < 0:
            req.first_token = self.now
            req.out += 1
            self.used += 1
            stream = (str(req.streaming).lower(),)
            self.tok.observe("time_to_first_token_seconds", self.now - req.arrival, stream)
        self.pending_out += min(req.max_new - req.out, CLIP_MAX_NEW_TOKENS)

    def _refresh(self, gen_throughput: float, hit_rate: float) -> None:
        """A log point: SGLang rewrites every scheduler gauge from the current state."""
        cap = max(self.capacity, 1)  # 0 only in a process that failed at startup
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
            "decode_sum_seq_lens": self._seq_sum(),
            "new_token_ratio": self.ratio,
            "num_retracted_reqs": self.retracted_since_log,
            "total_retracted_reqs": self.total_retracted,
            "fwd_occupancy": NAN,
        }
        self.retracted_since_log = 0
        self.last_log = self.now
