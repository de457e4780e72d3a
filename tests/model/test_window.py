"""Ring-buffer windows: bounded, time-filtered, and the aggregates rules rely on."""

import math

from sglang_tuner.model.scrape import Snapshot
from sglang_tuner.model.window import Window, capacity_for, frequency_of, frequently


def _fill(window: Window, rows: list[dict[str, float]], step: float = 5.0) -> None:
    for k, values in enumerate(rows):
        window.append(Snapshot("t", k * step, values))


def test_window_keeps_only_capacity_newest_samples_when_overfilled():
    window = Window(capacity=4)
    _fill(window, [{"q": float(k)} for k in range(10)])
    view = window.view(now=1000.0, window_seconds=1000.0)
    assert len(window) == 4
    assert view.values("q") == [6.0, 7.0, 8.0, 9.0]
    assert view.ts == [30.0, 35.0, 40.0, 45.0]


def test_window_view_excludes_samples_older_than_window_and_newer_than_now():
    window = Window(capacity=20)
    _fill(window, [{"q": float(k)} for k in range(10)])  # ts 0..45
    view = window.view(now=40.0, window_seconds=12.0)
    assert view.ts == [30.0, 35.0, 40.0]


def test_window_signal_missing_in_some_snapshots_is_not_zero():
    window = Window(capacity=10)
    _fill(window, [{"a": 1.0}, {"a": 2.0, "b": 7.0}, {"a": 3.0}])
    view = window.view(now=10.0, window_seconds=60.0)
    assert view.values("b") == [7.0]
    assert view.present("b") == 1
    assert view.present("never") == 0
    assert view.mean("never") is None


def test_window_fraction_counts_only_rows_with_every_signal_and_gate():
    window = Window(capacity=10)
    rows = [
        {"usage": 0.5, "queue": 3.0},
        {"usage": 0.95, "queue": 3.0},
        {"usage": 0.5},  # queue missing: not considered
        {"usage": 0.5, "queue": 0.0},  # gated out
    ]
    _fill(window, rows)
    view = window.view(now=15.0, window_seconds=100.0)
    ratio, considered = view.fraction(
        lambda r: r["usage"] < 0.9, ("usage", "queue"), gate=lambda r: r["queue"] > 0
    )
    assert considered == 2
    assert ratio == 0.5


def test_window_quantile_is_nearest_rank():
    window = Window(capacity=200)
    _fill(window, [{"x": float(v)} for v in range(1, 101)], step=1.0)
    view = window.view(now=100.0, window_seconds=1000.0)
    assert view.quantile("x", 0.5) == 50.0
    assert view.quantile("x", 0.99) == 99.0
    assert view.quantile("x", 1.0) == 100.0
    assert view.min("x") == 1.0 and view.max("x") == 100.0 and view.last("x") == 100.0


def test_window_clear_forgets_samples_and_signals():
    window = Window(capacity=5)
    _fill(window, [{"q": 1.0}] * 3)
    window.clear()
    assert len(window) == 0
    assert window.view(100.0, 100.0).count == 0


def test_window_new_signal_later_backfills_missing_for_older_rows():
    window = Window(capacity=5)
    _fill(window, [{"a": 1.0}, {"a": 1.0, "late": 2.0}])
    view = window.view(now=5.0, window_seconds=60.0)
    assert math.isnan(view.columns["late"][0])
    assert view.values("late") == [2.0]


def test_capacity_for_covers_window_at_interval():
    assert capacity_for(300.0, 5.0) == 62
    assert capacity_for(1.0, 5.0) == 3


def test_frequency_of_threshold_is_inclusive_and_needs_samples():
    assert frequency_of(50, 100, 0.5).held
    assert not frequency_of(49, 100, 0.5).held
    assert not frequency_of(0, 0, 0.0).held  # nothing considered is never "frequently"


def test_frequently_counts_only_samples_with_every_signal_and_passing_the_gate():
    window = Window(10)
    rows = [{"q": 0.0, "r": 1.0}, {"q": 0.0, "r": 0.0}, {"q": 5.0, "r": 2.0}, {"q": 0.0}]
    for k, values in enumerate(rows):
        window.append(Snapshot("t", float(k), values))
    view = window.view(3.0, 10.0)
    freq = frequently(view, lambda r: r["q"] == 0, ("q", "r"), 0.5, gate=lambda r: r["r"] > 0)
    assert (freq.ratio, freq.considered, freq.held) == (0.5, 2, True)


def test_resized_keeps_the_newest_samples_that_fit():
    window = Window(10)
    for ts in range(1, 9):
        window.append(Snapshot("gpu-a", float(ts), {"q": float(ts)}))
    smaller = window.resized(3)
    view = smaller.view(8.0, 100.0)
    assert view.ts == [6.0, 7.0, 8.0] and view.columns["q"] == [6.0, 7.0, 8.0]
    assert window.resized(20).view(8.0, 100.0).count == 8  # a larger one keeps them all
