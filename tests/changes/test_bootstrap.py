"""The statistics under a verdict: nearest-rank quantiles and the block-bootstrap ratio interval."""

import math

import pytest
from sglang_tuner.changes.bootstrap import LEVEL, METHOD, rank, ratio_interval


def _wobble(mean: float, n: int = 60, amplitude: float = 0.05, phase: float = 0.0) -> list[float]:
    return [mean * (1 + amplitude * math.sin(k * 1.7 + phase)) for k in range(n)]


@pytest.mark.parametrize(
    ("q", "expected"), [(0.0, 1.0), (0.1, 1.0), (0.5, 5.0), (0.9, 9.0), (0.99, 10.0), (1.0, 10.0)]
)
def test_rank_is_the_nearest_rank_quantile(q, expected):
    assert rank([float(v) for v in range(1, 11)], q) == expected


def test_rank_of_one_value_is_that_value_for_every_quantile():
    assert {rank([7.0], q) for q in (0.0, 0.5, 1.0)} == {7.0}


def test_ratio_interval_of_identical_constant_series_is_exactly_one():
    assert ratio_interval([4000.0] * 30, [4000.0] * 30) == (1.0, 1.0, 1.0)


def test_ratio_interval_brackets_a_real_rise_and_excludes_no_effect():
    ratio, low, high = ratio_interval(_wobble(4000), _wobble(4600, phase=1.0))
    assert ratio is not None and low is not None and high is not None
    assert low <= ratio <= high
    assert 1.0 < low and abs(ratio - 1.15) < 0.01


def test_ratio_interval_widens_with_noise():
    quiet = ratio_interval(_wobble(100, amplitude=0.01), _wobble(100, amplitude=0.01, phase=2.0))
    noisy = ratio_interval(_wobble(100, amplitude=0.3), _wobble(100, amplitude=0.3, phase=2.0))
    assert None not in quiet and None not in noisy
    assert noisy[2] - noisy[1] > 5 * (quiet[2] - quiet[1])  # type: ignore[operator]


def test_ratio_interval_is_repeatable_and_depends_on_nothing_but_the_values():
    old, new = _wobble(10, n=25), _wobble(12, n=31, phase=0.5)
    assert ratio_interval(old, new) == ratio_interval(list(old), list(new))


def test_ratio_interval_handles_series_shorter_than_a_block():
    ratio, low, high = ratio_interval([1.0, 2.0, 3.0], [2.0, 4.0, 6.0])
    assert ratio == 2.0 and low is not None and high is not None and low <= 2.0 <= high


def test_ratio_interval_no_ratio_from_a_mean_of_zero_before_or_a_negative_after():
    assert ratio_interval([0.0] * 10, [5.0] * 10) == (None, None, None)
    assert ratio_interval([5.0] * 10, [-1.0] * 10) == (None, None, None)


def test_ratio_interval_a_zero_after_is_a_ratio_of_zero():
    assert ratio_interval([5.0] * 10, [0.0] * 10) == (0.0, 0.0, 0.0)


def test_method_says_what_the_interval_is():
    assert f"{LEVEL:.0%}".replace("%", " %") in METHOD and "block" in METHOD
