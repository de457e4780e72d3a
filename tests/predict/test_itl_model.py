"""Inter-token latency against the per-rank batch: the linear fit, the batch for a target, and
ITL p99 at another batch (checked against the simulator)."""

import math
from dataclasses import replace

import pytest
from helpers import window_from
from sglang_physics import MODELS
from sglang_sim import SCENARIOS
from sglang_sim.gpus import gpu_named
from sglang_sim.measure import measure
from sglang_sim.workload import Load
from sglang_tuner.predict.itl_model import (
    batch_for_itl_target,
    itl_fit,
    itl_p99_change,
    stall_quantile,
)
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


def test_the_stall_quantile_is_one_prompts_tail_when_few_steps_wait():
    # 5 % of the steps admit a request (Poisson, mean 0.05): the 1 % of steps ITL p99 sees
    # wait for one prompt of exponential length, its tail beyond a fifth of those steps
    p = 1 - math.exp(-0.05)
    assert stall_quantile(0.05) == pytest.approx(math.log(p / 0.01), rel=0.03)  # and two
    assert stall_quantile(0.009) == 0.0  # fewer than 1 % of the steps wait at all


def test_the_stall_quantile_of_many_prompts_is_their_sum_and_its_spread():
    # 400 prompts a step: mean 400, variance 2 x 400 (a Poisson count of exponential lengths)
    assert stall_quantile(400) == pytest.approx(400 + 2.326 * math.sqrt(800), rel=0.02)


def test_a_stall_of_many_prompts_grows_almost_as_the_batch():
    change = itl_p99_change(0.02, 1.02, 0.0, 2.0, admitted=100)
    assert 0.75 < change < 0.95


def test_a_stall_of_one_prompt_grows_with_its_tail_not_the_batch():
    # one step in twenty admits a request: at 2.7x the batch the p99 step still waits for one
    # prompt, a longer one of its tail (+65 %), not for 2.7 times the prompts
    grown = itl_p99_change(0.02, 1.02, 0.0, 2.7, admitted=0.05)
    assert 0.5 < grown < 0.8
    shrunk = itl_p99_change(0.02, 1.02, 0.0, 0.5, admitted=0.05)
    assert -0.55 < shrunk < -0.3  # half the batch keeps more than half the tail

    # a price per pass (weights read once for all its prompts) makes longer stalls cheaper
    def priced(prompts: float) -> float:
        return 0.5 + prompts

    assert itl_p99_change(0.02, 1.02, 0.0, 2.7, 0.05, priced) < grown


def test_without_the_prompts_the_stall_is_proportional_to_the_batch():
    assert itl_p99_change(0.02, 1.02, 0.0, 2.0) == pytest.approx(2.02 / 1.02 - 1)
    assert itl_p99_change(0.02, 1.02, 1.0, 2.0) == pytest.approx((0.04 + 2.0) / 1.02 - 1)


@pytest.mark.parametrize(
    ("model", "gpu", "fraction"),
    [("qwen3-8b", "NVIDIA A100-SXM4-80GB", 0.43), ("llama-3.2-1b", "NVIDIA L4", 0.37)],
)
def test_a_pool_raise_predicts_the_itl_tail_the_simulator_measures(
    model: str, gpu: str, fraction: float
) -> None:
    from tests.scenario_harness import run_scenario

    base = SCENARIOS["healthy"].for_version("0.5.23")
    low = replace(
        base, llm=MODELS[model], gpu=gpu_named(gpu), load=Load(clients=1024),
        knobs=replace(base.knobs, mem_fraction_static=fraction),
    )  # fmt: skip
    finding = run_scenario("healthy", config=low, gpu_model=gpu).finding("mem_fraction_too_low")
    assert finding.action.prediction is not None and finding.action.suggested is not None
    tail = finding.action.prediction.effects["ITL p99"][0]
    raised = replace(
        low, knobs=replace(low.knobs, mem_fraction_static=float(finding.action.suggested))
    )
    before, after = (measure(c, seconds=600.0, seed=1) for c in (low, raised))
    measured = after.itl_p99 / before.itl_p99 - 1
    # the batch grows 1.7-2.7x; the tail as much would miss by 40-70 points
    assert abs(tail - measured) < 0.15, (tail, measured)
