"""TTFT p99 read off SGLang's wide buckets, against the simulator's fine histogram, on the
randomized matrix's online starts: the daemon's reading beside a candidate it did not adopt.

Each online case that `matrix_cases.draw` gives for the seeds (unperturbed: the reading, not
the physics, is measured) runs 60 simulated seconds, then a 300-s window scraped every 5 s
through the daemon's own mapper and window. Beside the window's true p99 it prints the daemon's
reading of the summed buckets (`predict.queueing.window_p99`: Prometheus's `histogram_quantile`,
evenly inside a bucket) and a candidate (`packed_quantile` below: a normal spread through the
bounds below the bucket, or through one bound and the window's exact mean), and how many of
each land within 5 % and 10 %. docs/performance.md says why the candidate was not adopted: read
into the queue model, it moved no matrix figure.

    PYTHONPATH=daemon python bench/ttft_read.py [--seed 31000] [--runs 300] [--verbose]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from statistics import NormalDist

sys.path.insert(0, str(Path(__file__).resolve().parent))

from matrix_cases import draw  # noqa: E402
from sglang_sim.exposition import render_metrics  # noqa: E402
from sglang_sim.fleet import config_for  # noqa: E402
from sglang_sim.measure import TTFT, _Window, percentile  # noqa: E402
from sglang_sim.model import ServerModel  # noqa: E402
from sglang_tuner.model.scrape import Snapshot  # noqa: E402
from sglang_tuner.model.signals import REQUEST_RATE, TTFT_MEAN_SECONDS  # noqa: E402
from sglang_tuner.model.window import Window  # noqa: E402
from sglang_tuner.model.window_histogram import (  # noqa: E402
    TTFT_BUCKETS,
    quantile_sorted,
    window_buckets,
)
from sglang_tuner.predict.queueing import _weighted_mean, window_p99  # noqa: E402
from sglang_tuner.sources.sglang import SignalMapper  # noqa: E402

STEP, START, SECONDS = 5.0, 60.0, 300.0
_INF = math.inf
_NORMAL = NormalDist()


def packed_quantile(
    q: float, bounds: Sequence[float], counts: Sequence[float], mean: float
) -> float | None:
    """The candidate reading: the `q` quantile of waits packed together about their mean (a
    queue's: TTFT's) from wide buckets, where Prometheus's even spread reads a p99 near the far
    edge of a bucket whose requests crowd its near one. Inside the bucket that holds it, kept
    between its edges:

    * a normal spread through the shares of the window past the two bounds below the bucket;
    * else (one of those shares is 0 or 1) through the share past its lower bound and the
      window's exact `mean` (the histogram's _sum over its _count);
    * else as Prometheus reads it (`quantile_sorted`), as also in the +Inf bucket, the lowest
      one, or without a mean."""
    even = quantile_sorted(q, bounds, counts)
    if even is None or not math.isfinite(mean) or mean <= 0:
        return even
    rank = q * counts[-1]
    at = next(k for k, count in enumerate(counts) if count >= rank)
    if bounds[at] == _INF or at == 0 or counts[at] == counts[at - 1]:
        return even
    found = _through_two(q, bounds, counts, at) if at >= 2 else None
    if found is None:
        found = _through_mean(q, bounds, counts, at, mean)
    return even if found is None else min(bounds[at], max(bounds[at - 1], found))


def _share_past(counts: Sequence[float], k: int) -> float:
    return 1 - counts[k] / counts[-1]


def _through_two(
    q: float, bounds: Sequence[float], counts: Sequence[float], at: int
) -> float | None:
    """The `q` quantile of the normal through the shares past `bounds[at - 2]` and
    `bounds[at - 1]`; None unless they fall strictly between 0 and 1, the nearer one smaller."""
    far, near = _share_past(counts, at - 2), _share_past(counts, at - 1)
    if not 0 < near < far < 1:
        return None
    z_far, z_near = _NORMAL.inv_cdf(1 - far), _NORMAL.inv_cdf(1 - near)
    sigma = (bounds[at - 1] - bounds[at - 2]) / (z_near - z_far)
    return bounds[at - 1] - z_near * sigma + _NORMAL.inv_cdf(q) * sigma


def _through_mean(
    q: float, bounds: Sequence[float], counts: Sequence[float], at: int, mean: float
) -> float | None:
    """The `q` quantile of the normal with the window's `mean` through the share past
    `bounds[at - 1]`; None unless that share is strictly between 0 and 1 and says a spread
    (the bound on the side of the mean its share puts it)."""
    near = _share_past(counts, at - 1)
    if not 0 < near < 1:
        return None
    z_near = _NORMAL.inv_cdf(1 - near)
    sigma = (bounds[at - 1] - mean) / z_near if abs(z_near) > _Z_FLAT else 0.0
    return mean + _NORMAL.inv_cdf(q) * sigma if sigma > 0 else None


_Z_FLAT = 0.05  # a bound at the median: its share says nothing of the spread


def read(seed: int) -> tuple[str, float, float | None, float | None] | None:
    """(server, true p99, the daemon's read, the candidate's) of one online start; None for
    an offline case or one that counted no TTFT."""
    case = draw(seed, 0.0)
    if case.profile != "online":
        return None
    model = ServerModel(config_for(case.spec()), seed=1)
    model.advance_to(START)
    fine = _Window(model)
    mapper, kept = SignalMapper(), Window(int(SECONDS / STEP) + 4)
    mapper.update(render_metrics(model), START)
    t = START
    while t < START + SECONDS:
        t += STEP
        model.advance_to(t)
        fine.sample()
        kept.append(Snapshot(case.name, t, mapper.update(render_metrics(model), t)))
    if not sum(fine.hists[TTFT].counts):
        return None
    view = kept.view(t, SECONDS)
    found = window_buckets(view, TTFT_BUCKETS)
    mean = _weighted_mean(view, TTFT_MEAN_SECONDS, REQUEST_RATE)  # the queue model's own
    packed = None if found is None or mean is None else packed_quantile(0.99, *found, mean=mean)
    return case.name, percentile(fine.hists[TTFT], 0.99), window_p99(view), packed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=31000, help="first seed (default 31000)")
    parser.add_argument("--runs", type=int, default=300, help="seeds drawn (default 300)")
    parser.add_argument("--verbose", action="store_true", help="one line per start")
    args = parser.parse_args()
    errors: dict[str, list[float]] = {"the daemon's (even)": [], "candidate (packed)": []}
    for seed in range(args.seed, args.seed + args.runs):
        found = read(seed)
        if found is None:
            continue
        name, truth, even, packed = found
        if even is None or packed is None or truth <= 0:
            continue
        errors["the daemon's (even)"].append(even / truth - 1)
        errors["candidate (packed)"].append(packed / truth - 1)
        if args.verbose:
            print(f"{seed} {name}: true {truth:.2f} s, even {even:.2f} s, packed {packed:.2f} s")
    n = len(errors["the daemon's (even)"])
    print(f"{n} online starts of seeds {args.seed}..{args.seed + args.runs - 1}")
    print("| reading | within 5 % | within 10 % | median abs error | mean error |")
    print("|---|---:|---:|---:|---:|")
    for label, relative in errors.items():
        absolute = [abs(e) for e in relative]
        print(
            f"| {label} | {sum(a <= 0.05 for a in absolute)} | {sum(a <= 0.10 for a in absolute)} "
            f"| {statistics.median(absolute):.1%} | {statistics.fmean(relative):+.1%} |"
        )


if __name__ == "__main__":
    main()
