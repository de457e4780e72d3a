"""Measure a configuration in simulated time: what a closed-loop benchmark reads off a server."""

from __future__ import annotations

from dataclasses import dataclass

from .model import ServerConfig, ServerModel
from .stats import GRIDS, Histogram

TTFT = "time_to_first_token_seconds"
ITL = "inter_token_latency_seconds"


@dataclass(frozen=True)
class Measurement:
    """Figures over the measured window (after the warm-up), summed over DP ranks."""

    seconds: float
    gen_throughput: float  # decode tokens per second of wall time (SGLang's gen throughput)
    token_usage: float  # mean of sglang:token_usage's unrounded value, 5-s samples while up
    retractions_per_min: float
    ttft_p50: float
    ttft_p99: float
    itl_p50: float
    itl_p99: float
    restarts: int  # crashes during the window
    requests_finished: int
    running_mean: float
    queue_mean: float
    up_ratio: float  # share of samples the server answered


class _Window:
    """Running sums of one measurement; counters survive restarts like Prometheus increase()."""

    def __init__(self, model: ServerModel) -> None:
        self.model, self.boots = model, model.boots
        self.last = self._counters()
        self.sums = dict.fromkeys(self.last, 0.0)
        self.hists = {name: Histogram(GRIDS[name]) for name in (TTFT, ITL)}
        self.last_hists = self._hists()
        self.samples: list[tuple[float, float, float]] = []
        self.down = 0

    def _counters(self) -> dict[str, float]:
        ranks, tok = self.model.ranks, self.model.tok.counters
        return {
            "decode": sum(r.stats.counters["realtime_tokens_total"].get(("decode",), 0.0)
                          for r in ranks if "realtime_tokens_total" in r.stats.counters),
            "retracted": sum(r.stats.counters.get("num_retracted_requests_total", {}).get((), 0.0)
                             for r in ranks),
            "finished": sum(tok.get("num_requests_total", {}).values()),
        }  # fmt: skip

    def _hists(self) -> dict[str, list[float]]:
        out = {}
        for name in (TTFT, ITL):
            counts = [0.0] * (len(GRIDS[name]) + 1)
            for hist in self.model.tok.hists.get(name, {}).values():
                counts = [a + b for a, b in zip(counts, hist.counts, strict=True)]
            out[name] = counts
        return out

    def sample(self) -> None:
        """Add what happened since the previous sample."""
        model = self.model
        if model.boots != self.boots:  # a restart: counters started again from zero
            self.boots = model.boots
            self.last = dict.fromkeys(self.last, 0.0)
            self.last_hists = {k: [0.0] * len(v) for k, v in self.last_hists.items()}
        now, hists = self._counters(), self._hists()
        for key, value in now.items():
            self.sums[key] += max(value - self.last[key], 0.0)
        for name, counts in hists.items():
            hist = self.hists[name]
            for i, (new, old) in enumerate(zip(counts, self.last_hists[name], strict=True)):
                hist.counts[i] += max(new - old, 0.0)
        self.last, self.last_hists = now, hists
        if model.status() != "up":
            self.down += 1
            return
        ranks = model.ranks
        usage = sum(r.used / r.capacity for r in ranks) / len(ranks)
        self.samples.append((usage, sum(len(r.running) for r in ranks),
                             sum(len(r.waiting) for r in ranks)))  # fmt: skip


def percentile(hist: Histogram, q: float) -> float:
    """The q-quantile of a histogram, interpolated inside its bucket (nan when empty)."""
    total = sum(hist.counts)
    if total <= 0:
        return float("nan")
    rank, acc = q * total, 0.0
    for i, count in enumerate(hist.counts):
        if acc + count >= rank and count > 0:
            low = hist.bounds[i - 1] if i > 0 else 0.0
            high = hist.bounds[i] if i < len(hist.bounds) else low
            return low + (high - low) * (rank - acc) / count
        acc += count
    return hist.bounds[-1]


def measure(
    config: ServerConfig,
    seconds: float = 600.0,
    seed: int = 1,
    warmup: float = 60.0,
    step: float = 5.0,
) -> Measurement:
    """Run `config` for warm-up + `seconds` of simulated time and report the window's figures."""
    model = ServerModel(config, seed=seed)
    model.advance_to(warmup)
    restarts, window = model.restarts, _Window(model)
    t = warmup
    while t < warmup + seconds - 1e-9:
        t = min(t + step, warmup + seconds)
        model.advance_to(t)
        window.sample()
    s, n = window.sums, max(len(window.samples), 1)
    ttft, itl = window.hists[TTFT], window.hists[ITL]
    return Measurement(
        seconds=seconds,
        gen_throughput=s["decode"] / seconds,
        token_usage=sum(x[0] for x in window.samples) / n,
        retractions_per_min=s["retracted"] * 60 / seconds,
        ttft_p50=percentile(ttft, 0.5),
        ttft_p99=percentile(ttft, 0.99),
        itl_p50=percentile(itl, 0.5),
        itl_p99=percentile(itl, 0.99),
        restarts=model.restarts - restarts,
        requests_finished=int(s["finished"]),
        running_mean=sum(x[1] for x in window.samples) / n,
        queue_mean=sum(x[2] for x in window.samples) / n,
        up_ratio=len(window.samples) / max(len(window.samples) + window.down, 1),
    )
