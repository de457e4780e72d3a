"""Step times against the H200 measurement (gpu-physics.md) and the model's expected shape."""

from __future__ import annotations

import pytest
from sglang_physics import GPUS, MODELS, Deployment, StepModel, blend, experts_touched

H200, H100 = GPUS["H200"], GPUS["H100"]
LLAMA_8B, LLAMA_70B = MODELS["llama-3.1-8b"], MODELS["llama-3.1-70b"]
# gpu-physics.md, "Decode: GEMM stack alone": batch -> measured ms on an H200
GEMM_STACK_MS = {1: 3.99, 16: 4.06, 64: 4.27, 128: 4.70, 256: 6.97}
HARNESS_LAUNCHES_PER_LAYER = 23.1  # the measurement's harness, from its profiler


@pytest.mark.parametrize(("batch", "measured_ms"), sorted(GEMM_STACK_MS.items()))
def test_decode_gemm_stack_matches_the_h200_measurement_within_six_percent(batch, measured_ms):
    step = StepModel(H200, LLAMA_8B)
    got = step.decode_forward_seconds(batch, kv_tokens=0) * 1000
    assert got == pytest.approx(measured_ms, rel=0.06)


def test_smooth_blend_beats_the_hard_max_where_weights_and_flops_meet():
    step = StepModel(H200, LLAMA_8B)
    weights = step.weights_seconds(128)
    gemm = step.gemm_flops(128) / (step.flops_per_s * 0.6)
    hard = max(weights, gemm) * 1000
    smooth = blend(weights, gemm) * 1000
    assert abs(smooth / 4.70 - 1) < 0.05 < abs(hard / 4.70 - 1)


def test_eager_decode_at_batch_one_is_bound_by_host_launches():
    # H200 measurement: eager 9.46 ms at batch 1, ~12.5 us of CPU per launch, 23.1 per layer
    step = StepModel(H200, LLAMA_8B, launches_per_layer=HARNESS_LAUNCHES_PER_LAYER)
    assert step.eager_cpu_s * 1000 == pytest.approx(9.46, rel=0.05)
    eager = step.decode_seconds(1, 1024, cuda_graph=False)
    assert eager - step.decode_seconds(1, 1024) > 0.5 * step.eager_cpu_s


def test_eager_decode_at_batch_256_costs_about_one_microsecond_per_launch():
    # H200 measurement: graph 24.49 ms vs eager 25.24 ms at batch 256, ctx 1024
    step = StepModel(H200, LLAMA_8B, launches_per_layer=HARNESS_LAUNCHES_PER_LAYER)
    kv = 256 * 1024
    extra = step.decode_seconds(256, kv, cuda_graph=False) - step.decode_seconds(256, kv)
    assert extra * 1000 == pytest.approx(25.24 - 24.49, rel=0.1)


def test_sglang_eager_cpu_cost_is_about_a_dozen_launches_per_layer():
    step = StepModel(H100, LLAMA_8B)
    assert step.eager_cpu_s == pytest.approx(32 * 11.5 * 12.5e-6)
    tp = StepModel(H100, LLAMA_8B, Deployment(tp=2))
    assert tp.eager_cpu_s > step.eager_cpu_s


def test_70b_on_eight_h100_decodes_slower_per_step_than_8b_on_one_while_weights_dominate():
    small = StepModel(H100, LLAMA_8B)
    large = StepModel(H100, LLAMA_70B, Deployment(tp=8))
    for batch in (1, 8, 32):
        kv = batch * 2000
        assert large.decode_seconds(batch, kv) > small.decode_seconds(batch, kv)
    # with a large KV read, eight GPUs' bandwidth (1 KV head each) beats one GPU's 8 heads
    assert large.decode_seconds(128, 128 * 2000) < small.decode_seconds(128, 128 * 2000)


def test_decode_step_grows_with_kv_and_shrinks_with_bandwidth():
    h100, h200 = StepModel(H100, LLAMA_8B), StepModel(H200, LLAMA_8B)
    assert h100.decode_seconds(64, 400_000) > h100.decode_seconds(64, 100_000)
    assert h200.decode_seconds(64, 400_000) < h100.decode_seconds(64, 400_000)


def test_expected_experts_touched_grows_then_saturates():
    assert experts_touched(128, 8, 1) == pytest.approx(8)
    assert experts_touched(128, 8, 16) == pytest.approx(128 * (1 - (120 / 128) ** 16))
    assert 127 < experts_touched(128, 8, 512) <= 128
    assert experts_touched(0, 0, 64) == 0


def test_moe_decode_step_grows_sublinearly_with_batch():
    step = StepModel(H100, MODELS["qwen3-30b-a3b"])
    one, sixteen, many, big = (step.decode_forward_seconds(b, 0) for b in (1, 16, 64, 256))
    assert one < sixteen < 8 * one  # 16 rows touch ~82 of 128 experts, not 16 x 8 = 128
    assert step.weight_bytes_read(1) < 0.25 * step.weight_bytes_read(256)
    assert many < big < 1.05 * many  # every expert is read: only the FLOPs still grow


def test_moe_batch_one_reads_only_the_active_experts():
    spec = MODELS["qwen3-30b-a3b"]
    step = StepModel(H100, spec)
    assert step.weight_bytes_read(1) == pytest.approx(spec.active_params * 2, rel=1e-6)


def test_dp_attention_moe_layer_sees_every_ranks_tokens():
    spec = MODELS["deepseek-v3"]
    plain = StepModel(H200, spec, Deployment(tp=8, ep=8))
    dp = StepModel(H200, spec, Deployment(tp=8, dp=8, dp_attention=True, ep=8))
    assert dp.weight_bytes_read(4) == pytest.approx(
        dp.dense_params_gpu + experts_touched(256, 8, 32) * dp.expert_params_gpu, rel=1e-9
    )
    assert dp.weight_bytes_read(4) > plain.weight_bytes_read(4)


def test_deepseek_v3_uses_fp8_compute_on_hopper_and_bf16_on_ampere():
    spec = MODELS["deepseek-v3"]
    assert StepModel(H200, spec, Deployment(tp=8)).flops_per_s == 1979e12
    assert StepModel(GPUS["A100"], spec, Deployment(tp=8)).flops_per_s == 312e12


def test_prefill_time_grows_with_tokens_and_uses_the_default_causal_attention():
    step = StepModel(H100, LLAMA_8B)
    assert step.prefill_seconds(8192) > step.prefill_seconds(1024) > step.prefill_seconds(16)
    explicit = step.prefill_seconds(4096, LLAMA_8B.attention_flops(4096, 2048))
    assert step.prefill_seconds(4096) == pytest.approx(explicit)
