"""Inter-token latency against the per-rank batch: the linear fit, and the batch for a target."""

import pytest
from helpers import window_from
from sglang_tuner.predict.itl_model import batch_for_itl_target, itl_fit
from sglang_tuner.rule import RuleInput


def _input(target: float = 0.03, **series: str) -> RuleInput:
    view = window_from(**series)
    return RuleInput(view, None, "online", {"itl_p50_max_seconds": target}, 0.5, 3, 5.0, 0.0)


def _line(batches: list[int], intercept: float = 0.01, slope: float = 0.0001) -> dict[str, str]:
    """ITL p50 exactly `intercept + slope * batch` at each batch."""
    return {
        "num_running_reqs": " ".join(str(b) for b in batches),
        "itl_p50_seconds": " ".join(f"{intercept + slope * b!r}" for b in batches),
    }


def test_itl_fit_recovers_a_straight_line():
    fit = itl_fit(_input(**_line([50, 100, 150, 200, 250])))
    assert fit is not None
    intercept, slope, samples = fit
    assert intercept == pytest.approx(0.01) and slope == pytest.approx(0.0001) and samples == 5


def test_itl_fit_leaves_out_idle_samples_and_samples_without_latency():
    batches = "0 50 100 150 0"
    idle_ends = {"num_running_reqs": batches, "itl_p50_seconds": "0.5 0.015 0.02 0.025 0.5"}
    fit = itl_fit(_input(**idle_ends))  # the idle samples' 500 ms would bend the line
    assert fit is not None and fit[2] == 3
    assert fit[0] == pytest.approx(0.01) and fit[1] == pytest.approx(0.0001)
    gap = {"num_running_reqs": batches, "itl_p50_seconds": "0.5 0.015 _ 0.025 0.5"}
    assert itl_fit(_input(**gap)) is None  # two usable samples are not a fit


def test_itl_fit_needs_more_than_one_batch_size():
    assert itl_fit(_input(**_line([64, 64, 64, 64]))) is None


def test_itl_fit_follows_the_busiest_rank_where_the_server_says():
    series = _line([10, 20, 30, 40])  # ITL follows the busiest rank's batch
    series["num_running_reqs_max_rank"] = series.pop("num_running_reqs")
    series["num_running_reqs"] = "100 80 120 90"  # the total over ranks: no line in it
    fit = itl_fit(_input(**series))
    assert fit is not None and fit[1] == pytest.approx(0.0001)


def test_batch_for_itl_target_solves_the_fit_for_the_target():
    per_rank, expected, basis = batch_for_itl_target(
        _input(0.03, **_line([100, 150, 200, 250, 300])), batch=300, itl=0.04
    )
    assert per_rank == 200  # 0.01 + 0.0001 * 200 = 0.03, exactly: not rounded down to 199
    assert expected == pytest.approx(0.03)
    assert basis == "a linear fit of ITL on batch over 5 samples"


def test_batch_for_itl_target_takes_itl_as_proportional_without_a_usable_fit():
    flat = {"num_running_reqs": "300x5", "itl_p50_seconds": "0.06x5"}
    assert batch_for_itl_target(_input(0.03, **flat), batch=300, itl=0.06) == (
        150,
        0.03,
        "ITL taken as proportional to the batch (no usable fit)",
    )


def test_batch_for_itl_target_ignores_a_fit_whose_idle_latency_already_misses_the_target():
    slow = _line([100, 200, 300, 400], intercept=0.05)  # 50 ms at batch 0: no batch meets 30 ms
    per_rank, expected, basis = batch_for_itl_target(_input(0.03, **slow), batch=400, itl=0.09)
    assert (per_rank, expected) == (133, 0.03) and "proportional" in basis


def test_batch_for_itl_target_ignores_a_fit_where_latency_falls_with_the_batch():
    falling = _line([100, 200, 300, 400], intercept=0.08, slope=-0.0001)
    per_rank, _, basis = batch_for_itl_target(_input(0.03, **falling), batch=400, itl=0.04)
    assert per_rank == 300 and "proportional" in basis


def test_batch_for_itl_target_suggests_at_least_one_request():
    tiny = _line([1, 2, 3, 4], intercept=0.029, slope=0.01)
    per_rank, expected, _ = batch_for_itl_target(_input(0.03, **tiny), batch=4, itl=0.07)
    assert per_rank == 1 and expected == pytest.approx(0.039)
    assert batch_for_itl_target(_input(0.03, **{"num_running_reqs": "_x3"}), 2, 1.0)[0] == 1
