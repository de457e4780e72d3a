"""Memory of a target's window with and without the histogram buckets it carries.

Scrapes the simulator's six `bench/scale.py` scenarios every 5 seconds through the daemon's own
mapper, then fills `--windows` windows of `--capacity` samples (the default: the 600 s
verification window at 5 s, as the daemon sizes it) with those samples, once as the mapper
gives them and once with the histogram buckets left out, and prints what each window holds
(`tracemalloc`, the windows only).

    PYTHONPATH=daemon python bench/window_memory.py [--capacity 122] [--windows 600]
"""

from __future__ import annotations

import argparse
import tracemalloc

from sglang_sim import SCENARIOS
from sglang_sim.exposition import render_metrics
from sglang_sim.model import ServerModel
from sglang_tuner.model.scrape import Snapshot
from sglang_tuner.model.window import Window
from sglang_tuner.model.window_histogram import is_bucket_signal
from sglang_tuner.sources.sglang import SignalMapper

MIX = ("healthy", "scheduler_too_conservative", "retraction_storm", "client_too_slow",
       "queue_flood", "idle")  # fmt: skip
STEP = 5.0


def samples(scenario: str, count: int) -> list[tuple[float, dict[str, float]]]:
    """`count` scrapes of one simulated server through the mapper, from 60 s in."""
    model = ServerModel(SCENARIOS[scenario].for_version("0.5.23"), seed=1)
    model.advance_to(60.0)
    mapper, t, out = SignalMapper(), 60.0, []
    mapper.update(render_metrics(model), t)
    for _ in range(count):
        t += STEP
        model.advance_to(t)
        out.append((t, mapper.update(render_metrics(model), t)))
    return out


def kib_per_window(series: list[list[tuple[float, dict[str, float]]]], capacity: int,
                   windows: int, buckets: bool) -> float:  # fmt: skip
    """KiB each of `windows` windows holds, filled from `series` in turn."""
    tracemalloc.start()
    kept = []
    for k in range(windows):
        window = Window(capacity)
        for t, values in series[k % len(series)]:
            if not buckets:
                values = {n: v for n, v in values.items() if not is_bucket_signal(n)}
            window.append(Snapshot("t", t, values))
        kept.append(window)
    used, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return used / windows / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacity", type=int, default=122, help="samples per window")
    parser.add_argument("--windows", type=int, default=600)
    args = parser.parse_args()
    series = [samples(s, args.capacity) for s in MIX]
    without = kib_per_window(series, args.capacity, args.windows, buckets=False)
    with_buckets = kib_per_window(series, args.capacity, args.windows, buckets=True)
    print(f"| window of {args.capacity} samples | KiB per target |")
    print("|---|---:|")
    print(f"| without the buckets | {without:.1f} |")
    print(f"| with the buckets (as the daemon keeps it) | {with_buckets:.1f} |")
    print(f"| difference | {with_buckets - without:+.1f} |")


if __name__ == "__main__":
    main()
