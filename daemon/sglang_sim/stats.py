"""Counters and histograms the simulated processes accumulate, as prometheus_client would."""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict

from .catalogue import (
    E2E_NEW,
    ITL_BUCKETS,
    QUEUE_NEW,
    STAGE_BUCKETS,
    TOKEN_BUCKETS,
    TTFT_BUCKETS,
)
from .workload import Req

LabelValues = tuple[str, ...]


class Histogram:
    """Raw observations kept at a fine resolution; bucketed per version at exposition time."""

    __slots__ = ("bounds", "counts", "total", "count")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0.0] * (len(bounds) + 1)
        self.total = 0.0
        self.count = 0.0

    def observe(self, value: float, n: float = 1.0, total: float | None = None) -> None:
        """Add n observations of value (total overrides the sum, for SGLang's ITL trick)."""
        self.counts[bisect_left(self.bounds, value)] += n
        self.total += value * n if total is None else total
        self.count += n

    def cumulative(self, bounds: tuple[float, ...]) -> list[float]:
        """Cumulative counts at the given bounds (a subset of or equal to self.bounds)."""
        out, acc, i = [], 0.0, 0
        for bound in bounds:
            while i < len(self.bounds) and self.bounds[i] <= bound:
                acc += self.counts[i]
                i += 1
            out.append(acc)
        return out


# Fine grids: the union of every version's buckets, so each version's page is exact; latency
# grids add 5 % log steps from 1 ms so measure.py can read percentiles off them.
LOG_GRID = tuple(round(0.001 * 1.05**i, 9) for i in range(300))
FINE_QUEUE = tuple(sorted({*QUEUE_NEW, 0.1, 0.2, 0.5}))
FINE_E2E = tuple(sorted({*E2E_NEW, 800}))
GRIDS: dict[str, tuple[float, ...]] = {
    "time_to_first_token_seconds": tuple(sorted({*map(float, TTFT_BUCKETS), *LOG_GRID})),
    "inter_token_latency_seconds": tuple(sorted({*ITL_BUCKETS, *LOG_GRID})),
    "request_time_per_output_token_seconds": ITL_BUCKETS,
    "e2e_request_latency_seconds": tuple(float(b) for b in FINE_E2E),
    "queue_time_seconds": tuple(float(b) for b in FINE_QUEUE),
    "per_stage_req_latency_seconds": STAGE_BUCKETS,
    "prompt_tokens_histogram": tuple(float(b) for b in TOKEN_BUCKETS),
    "uncached_prompt_tokens_histogram": tuple(float(b) for b in TOKEN_BUCKETS),
    "generation_tokens_histogram": tuple(float(b) for b in TOKEN_BUCKETS),
}


class Accumulator:
    """Counters and histograms of one process, keyed by family name and extra label values."""

    def __init__(self) -> None:
        self.counters: dict[str, dict[LabelValues, float]] = defaultdict(dict)
        self.hists: dict[str, dict[LabelValues, Histogram]] = defaultdict(dict)

    def inc(self, family: str, amount: float, labels: LabelValues = ()) -> None:
        """Increment a counter series (creating it, as a touched labelled metric)."""
        series = self.counters[family]
        series[labels] = series.get(labels, 0.0) + amount

    def observe(
        self,
        family: str,
        value: float,
        labels: LabelValues = (),
        n: float = 1.0,
        total: float | None = None,
    ) -> None:
        """Observe into a histogram series."""
        series = self.hists[family]
        hist = series.get(labels)
        if hist is None:
            hist = series[labels] = Histogram(GRIDS[family])
        hist.observe(value, n, total)


class TokenizerStats(Accumulator):
    """The tokenizer process's per-request metrics."""

    def finished(self, req: Req, at: float) -> None:
        """Record one finished request, as TokenizerMetricsCollector does."""
        stream = (str(req.streaming).lower(),)
        self.inc("prompt_tokens_total", req.prompt, stream)
        self.inc("generation_tokens_total", req.out, stream)
        self.inc("num_requests_total", 1, stream)
        if req.cached:
            self.inc("cached_tokens_total", req.cached, ("device",))
        self.observe("e2e_request_latency_seconds", at - req.arrival, stream)
        if req.out > 1:
            tpot = (at - req.first_token) / (req.out - 1)
            self.observe("request_time_per_output_token_seconds", tpot, stream)
        self.observe("prompt_tokens_histogram", req.prompt)
        self.observe("uncached_prompt_tokens_histogram", req.prompt - req.cached)
        self.observe("generation_tokens_histogram", req.out)
