"""The window's p99 as the predictor reads it, against the window's own histogram.

The predictor reads a window's TTFT and ITL p99 from the buckets each sample carries
(`model.window_histogram`, summed over the window); without them, it pooled each interval's p50
and p99 (`predict.queueing.pooled_p99`: each interval's tail falling log-linearly from its p50
to its p99). This runs simulated scenarios, scrapes the server's `/metrics` page every 5
seconds through the daemon's own mapper and window, and prints what the daemon reads (carried
buckets, SGLang's bounds) beside the p99 of the whole window's fine histogram, the pooled p99
and the median interval's.

    PYTHONPATH=daemon python bench/window_p99.py [--start 60] [--seconds 300] [scenario ...]
"""

from __future__ import annotations

import argparse

from sglang_sim import SCENARIOS
from sglang_sim.exposition import render_metrics
from sglang_sim.measure import GRIDS, ITL, TTFT, _Window, percentile
from sglang_sim.model import ServerModel
from sglang_sim.stats import Histogram
from sglang_tuner.model.scrape import Snapshot
from sglang_tuner.model.signals import GEN_THROUGHPUT, ITL_P50_SECONDS, ITL_P99_SECONDS
from sglang_tuner.model.window import Window
from sglang_tuner.predict.queueing import TAIL, _above, window_p99
from sglang_tuner.sources.sglang import SignalMapper

STEP = 5.0  # the daemon's default scrape interval


def pooled(rows: list[tuple[float, float, float]]) -> float:
    """`pooled_p99` over (weight, p50, p99) rows."""
    total = sum(w for w, _, _ in rows)
    low, high = min(r[2] for r in rows), max(r[2] for r in rows)
    for _ in range(50):
        mid = (low + high) / 2
        above = sum(w * _above(mid, p50, p99) for w, p50, p99 in rows) / total
        low, high = (mid, high) if above > TAIL else (low, mid)
    return (low + high) / 2


def window(
    scenario: str, start: float, seconds: float
) -> dict[str, tuple[float, float, float, float | None]]:
    """name -> (histogram p99, pooled p99, median interval's p99, the daemon's window p99)
    over [start, start+seconds]."""
    model = ServerModel(SCENARIOS[scenario].for_version("0.5.23"), seed=1)
    model.advance_to(start)
    sums = _Window(model)
    mapper, kept = SignalMapper(), Window(int(seconds / STEP) + 4)
    mapper.update(render_metrics(model), start)
    rows: dict[str, list[tuple[float, float, float]]] = {TTFT: [], ITL: []}
    t = start
    while t < start + seconds:
        before = {name: list(h.counts) for name, h in sums.hists.items()}
        t += STEP
        model.advance_to(t)
        sums.sample()
        kept.append(Snapshot(scenario, t, mapper.update(render_metrics(model), t)))
        for name in (TTFT, ITL):
            delta = Histogram(GRIDS[name])
            now = sums.hists[name].counts
            delta.counts = [a - b for a, b in zip(now, before[name], strict=True)]
            n = sum(delta.counts)
            p50, p99 = (percentile(delta, q) for q in (0.5, 0.99)) if n else (0.0, 0.0)
            if n and 0 < p50 <= p99:
                rows[name].append((n, p50, p99))
    view = kept.view(t, seconds)
    daemon = {
        TTFT: window_p99(view),
        ITL: window_p99(view, (ITL_P50_SECONDS, ITL_P99_SECONDS), GEN_THROUGHPUT),
    }
    out = {}
    for name, found in rows.items():
        if len(found) >= 3:
            median = sorted(r[2] for r in found)[len(found) // 2]
            whole = percentile(sums.hists[name], 0.99)
            out[name] = (whole, pooled(found), median, daemon[name])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", default=["online_batch_too_large", "healthy",
                                                         "retraction_storm"])  # fmt: skip
    parser.add_argument("--start", type=float, default=60.0, help="simulated seconds skipped")
    parser.add_argument("--seconds", type=float, default=300.0, help="the window (default 300)")
    args = parser.parse_args()
    print("| scenario | latency | window histogram p99 | the daemon's (carried buckets) "
          "| pooled p99 | median interval |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|")
    for scenario in args.scenarios:
        found = window(scenario, args.start, args.seconds)
        for name, (hist, pool, median, daemon) in found.items():
            label = "TTFT" if name == TTFT else "ITL"
            read = "-" if daemon is None else f"{daemon:.3f} s"
            print(f"| {scenario} | {label} | {hist:.3f} s | {read} | {pool:.3f} s "
                  f"| {median:.3f} s |")  # fmt: skip


if __name__ == "__main__":
    main()
