"""The perturbation parameter (sglang_physics/perturbation.py): each factor moves its own term of
the step model by exactly the drawn factor, and the identity changes nothing."""

from __future__ import annotations

import pytest
from sglang_physics import GPUS, MODELS, Deployment, Perturbation, StepModel

H100, H200 = GPUS["H100"], GPUS["H200"]
LLAMA_8B, QWEN_MOE = MODELS["llama-3.1-8b"], MODELS["qwen3-30b-a3b"]


def test_the_identity_gives_the_unperturbed_step_to_the_last_bit():
    plain, same = StepModel(H100, LLAMA_8B), StepModel(H100, LLAMA_8B, perturbation=Perturbation())
    for batch in (1, 64, 256):
        assert plain.decode_seconds(batch, batch * 2000) == same.decode_seconds(batch, batch * 2000)
    assert plain.prefill_seconds(8192) == same.prefill_seconds(8192)


def test_bandwidth_factor_scales_a_weight_bound_decode_by_its_inverse():
    plain = StepModel(H100, LLAMA_8B)
    slow = StepModel(H100, LLAMA_8B, perturbation=Perturbation(hbm_bandwidth=0.8))
    assert slow.weights_seconds(1) == pytest.approx(plain.weights_seconds(1) / 0.8)
    assert slow.kv_s_per_token == pytest.approx(plain.kv_s_per_token / 0.8)


def test_step_overhead_factor_adds_exactly_its_share_of_the_overhead():
    plain = StepModel(H100, LLAMA_8B)
    costly = StepModel(H100, LLAMA_8B, perturbation=Perturbation(step_overhead=1.25))
    extra = costly.decode_seconds(8, 8000) - plain.decode_seconds(8, 8000)
    assert extra == pytest.approx(0.25 * 0.7e-3)


def test_launch_factors_scale_the_eager_costs():
    p = Perturbation(launch_cpu=1.2, launch_gap=0.9)
    plain, drawn = StepModel(H100, LLAMA_8B), StepModel(H100, LLAMA_8B, perturbation=p)
    assert drawn.eager_cpu_s == pytest.approx(plain.eager_cpu_s * 1.2)
    assert drawn.eager_gap_s == pytest.approx(plain.eager_gap_s * 0.9)


def test_moe_inefficiency_makes_only_a_moe_model_slower():
    worse = Perturbation(moe_inefficiency=1.25)
    moe, moe_worse = StepModel(H100, QWEN_MOE), StepModel(H100, QWEN_MOE, perturbation=worse)
    dense, dense_worse = StepModel(H100, LLAMA_8B), StepModel(H100, LLAMA_8B, perturbation=worse)
    assert moe_worse.decode_seconds(64, 64_000) > moe.decode_seconds(64, 64_000) * 1.1
    assert dense_worse.decode_seconds(64, 64_000) == dense.decode_seconds(64, 64_000)


def test_prefill_gemm_factor_slows_a_compute_bound_prefill():
    slow = StepModel(H200, LLAMA_8B, perturbation=Perturbation(prefill_gemm=0.8))
    assert slow.prefill_seconds(8192) > StepModel(H200, LLAMA_8B).prefill_seconds(8192) * 1.1


def test_allreduce_factors_move_only_a_tensor_parallel_step():
    p = Perturbation(allreduce_latency=1.25, link_bandwidth=0.75)
    tp4 = Deployment(tp=4)
    plain = StepModel(H100, MODELS["llama-3.1-70b"], tp4)
    drawn = StepModel(H100, MODELS["llama-3.1-70b"], tp4, perturbation=p)
    assert drawn.allreduce_seconds(64) > plain.allreduce_seconds(64)
    assert StepModel(H100, LLAMA_8B, perturbation=p).allreduce_seconds(64) == 0.0


def test_drawn_maps_unit_draws_to_factors_within_the_spread():
    p = Perturbation.drawn(0.25, {"hbm_bandwidth": -1.0, "decode_gemm": 0.5})
    assert p.hbm_bandwidth == pytest.approx(0.75)
    assert p.decode_gemm == pytest.approx(1.125)
    assert p.step_overhead == 1.0


@pytest.mark.parametrize(
    ("spread", "unit", "message"),
    [
        (1.5, {}, "spread must be in"),
        (0.25, {"warp_speed": 0.1}, "unknown perturbed constant"),
        (0.25, {"hbm_bandwidth": 2.0}, "in \\[-1, 1\\]"),
    ],
)
def test_bad_draws_are_refused_with_the_reason(spread, unit, message):
    with pytest.raises(ValueError, match=message):
        Perturbation.drawn(spread, unit)


def test_a_non_positive_factor_is_refused():
    with pytest.raises(ValueError, match="hbm_bandwidth must be > 0"):
        Perturbation(hbm_bandwidth=0.0)
