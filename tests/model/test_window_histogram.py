"""A window's latency histogram carried as per-interval bucket signals, and its quantiles."""

import math

import pytest
from sglang_tuner.model.scrape import Snapshot
from sglang_tuner.model.signals import GEN_THROUGHPUT, ITL_P50_SECONDS, ITL_P99_SECONDS
from sglang_tuner.model.window import Window, WindowView
from sglang_tuner.model.window_histogram import (
    ITL_BUCKETS,
    bucket_signals,
    is_bucket_signal,
    quantile_sorted,
    share_above,
    window_buckets,
    window_quantile,
)
from sglang_tuner.predict.queueing import pooled_p99, window_p99
from sglang_tuner.sources.histograms import quantile

INF = math.inf
# SGLang's ITL bounds, in part (seconds)
BOUNDS = (0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, INF)


def interval(per_bucket: dict[float, float]) -> tuple[dict[str, float], list[float]]:
    """One scrape interval that counted `per_bucket` tokens (le -> count): its signals as the
    mapper gives them, and its cumulative counts."""
    cumulative, running = [], 0.0
    for le in BOUNDS:
        running += per_bucket.get(le, 0.0)
        cumulative.append(running)
    values = bucket_signals(ITL_BUCKETS, BOUNDS, cumulative)
    as_dict = dict(zip(BOUNDS, cumulative, strict=True))
    values[ITL_P50_SECONDS] = quantile(0.5, as_dict) or 0.0
    values[ITL_P99_SECONDS] = quantile(0.99, as_dict) or 0.0
    values[GEN_THROUGHPUT] = running / 5.0
    return values, cumulative


def view_of(samples: list[dict[str, float]]) -> WindowView:
    window = Window(len(samples) + 2)
    for k, values in enumerate(samples):
        window.append(Snapshot("t", 5.0 * (k + 1), values))
    return window.view(5.0 * len(samples), 5.0 * len(samples))


def test_an_interval_carries_only_what_it_counted_and_the_bucket_below_each() -> None:
    values, _ = interval({0.04: 900.0, 2.0: 3.0})
    carried = {k: v for k, v in values.items() if is_bucket_signal(k)}
    assert carried == {
        "itl_bucket:0.02": 0.0,
        "itl_bucket:0.04": 900.0,
        "itl_bucket:1.0": 0.0,
        "itl_bucket:2.0": 3.0,
    }


def test_bounds_that_do_not_ascend_or_end_in_inf_carry_nothing() -> None:
    assert bucket_signals(ITL_BUCKETS, (0.1, 0.05, INF), [1.0, 2.0, 3.0]) == {}
    assert bucket_signals(ITL_BUCKETS, (0.1, 0.2), [1.0, 2.0]) == {}


def test_the_windows_quantile_is_the_histogram_of_the_whole_window() -> None:
    # a decode step of 30-40 ms; one interval in five has a few tokens that waited for a
    # prefill of 1-2 s: too few to be the window's p99, a visible share of their interval's
    shapes = [{0.04: 1000.0, 2.0: 15.0}, *[{0.04: 1000.0}] * 4] * 12
    samples, total = [], [0.0] * len(BOUNDS)
    for shape in shapes:
        values, cumulative = interval(shape)
        samples.append(values)
        total = [a + b for a, b in zip(total, cumulative, strict=True)]
    view = view_of(samples)
    whole = quantile(0.99, dict(zip(BOUNDS, total, strict=True)))
    assert window_quantile(view, ITL_BUCKETS, 0.99) == pytest.approx(whole)
    assert whole is not None and whole < 0.04
    # pooling the intervals' own p99s reads the stalled intervals' tail as the window's
    pooled = pooled_p99(view, (ITL_P50_SECONDS, ITL_P99_SECONDS), GEN_THROUGHPUT)
    assert pooled is not None and pooled > 0.5
    assert window_p99(view, (ITL_P50_SECONDS, ITL_P99_SECONDS), GEN_THROUGHPUT) == whole


def test_a_window_mostly_without_buckets_falls_back_to_pooling() -> None:
    samples = [interval({0.04: 1000.0, 2.0: 15.0})[0] for _ in range(10)]
    stripped = [{k: v for k, v in s.items() if not is_bucket_signal(k)} for s in samples]
    view = view_of(stripped[:6] + samples[6:])  # stored before the buckets were carried
    assert window_buckets(view, ITL_BUCKETS) is None
    pooled = pooled_p99(view, (ITL_P50_SECONDS, ITL_P99_SECONDS), GEN_THROUGHPUT)
    assert window_p99(view, (ITL_P50_SECONDS, ITL_P99_SECONDS), GEN_THROUGHPUT) == pooled


def test_rules_rows_do_not_carry_the_buckets() -> None:
    view = view_of([interval({0.04: 1000.0})[0] for _ in range(4)])
    rows = view.rows((ITL_P50_SECONDS,))
    assert len(rows) == 4 and not any(is_bucket_signal(k) for row in rows for k in row)


def test_a_tail_read_inside_a_doubling_bucket_is_nearer_the_truth_than_an_even_spread() -> None:
    # latencies exponential with mean 0.1 s, counted in SGLang-like doubling buckets
    bounds = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6, INF)
    counts = [1e6 * (1 - math.exp(-le / 0.1)) if le != INF else 1e6 for le in bounds]
    true_p99 = -0.1 * math.log(0.01)  # 0.46 s, inside (0.4, 0.8]
    even = quantile_sorted(0.99, bounds, counts)
    as_tail = quantile_sorted(0.99, bounds, counts, tail=True)
    assert even is not None and as_tail is not None
    assert as_tail == pytest.approx(true_p99, rel=1e-6)  # exact for an exponential tail
    assert abs(even - true_p99) > 0.05
    # at or below the median the read is Prometheus's own
    assert quantile_sorted(0.3, bounds, counts, tail=True) == quantile_sorted(0.3, bounds, counts)


def test_the_share_above_a_time_is_spread_evenly_inside_its_bucket():
    # 50 tokens in (0, 10] ms, 20 in (10, 20], 30 in (20, 40]
    bounds, counts = (0.01, 0.02, 0.04, INF), (50.0, 70.0, 100.0, 100.0)
    assert share_above(0.015, bounds, counts) == pytest.approx(0.4)  # half of (10, 20] above
    assert share_above(0.005, bounds, counts) == pytest.approx(0.75)  # the lowest from 0
    assert share_above(0.02, bounds, counts) == pytest.approx(0.3)  # a bound: what lies past it
    assert share_above(0.05, bounds, counts) == 0.0
    assert share_above(0.05, (0.01, 0.04, INF), (50.0, 90.0, 100.0)) == pytest.approx(0.1)
    assert share_above(0.01, bounds, (0.0, 0.0, 0.0, 0.0)) is None  # nothing counted
    assert share_above(0.01, (0.01, 0.02), (5.0, 10.0)) is None  # no +Inf bucket
