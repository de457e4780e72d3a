"""KV-pool sizing follows SGLang's --mem-fraction-static arithmetic."""

from __future__ import annotations

import pytest
from sglang_physics import GPUS, MODELS, Deployment, kv_pool_tokens, memory_split
from sglang_physics.memory import CUDA_CONTEXT_GIB, GIB, TP_COMM_GIB

H100 = GPUS["H100"]


def test_pool_is_fraction_of_total_minus_weights_over_cell_size():
    spec = MODELS["llama-3.1-8b"]
    total = H100.memory_gib - CUDA_CONTEXT_GIB
    expected = (total * 0.88 - spec.params * 2 / GIB) * GIB // (32 * 8 * 128 * 2 * 2)
    assert kv_pool_tokens(H100, spec, Deployment(), 0.88) == int(expected)


def test_pool_grows_with_mem_fraction_and_doubles_with_fp8_kv():
    spec = MODELS["llama-3.1-8b"]
    low = kv_pool_tokens(H100, spec, Deployment(), 0.75)
    high = kv_pool_tokens(H100, spec, Deployment(), 0.89)
    fp8 = kv_pool_tokens(H100, spec, Deployment(kv_dtype_bytes=1), 0.89)
    assert low < high and fp8 == pytest.approx(2 * high, abs=2)


def test_tensor_parallel_splits_weights_and_pays_comm_buffers():
    spec = MODELS["llama-3.1-70b"]
    split = memory_split(H100, spec, Deployment(tp=4), 0.88)
    assert split.total_gib == pytest.approx(H100.memory_gib - CUDA_CONTEXT_GIB - TP_COMM_GIB)
    assert split.weight_gib == pytest.approx(spec.params * 2 / 4 / GIB)
    assert split.kv_pool_tokens > 0 and split.free_gib > 0


def test_model_that_does_not_fit_gets_an_empty_pool():
    assert kv_pool_tokens(H100, MODELS["llama-3.1-70b"], Deployment(), 0.9) == 0


def test_deepseek_v3_fits_eight_h200_with_dp_attention_replicating_attention():
    spec, h200 = MODELS["deepseek-v3"], GPUS["H200"]
    plain = memory_split(h200, spec, Deployment(tp=8), 0.8)
    dp = memory_split(h200, spec, Deployment(tp=8, dp=8, dp_attention=True), 0.8)
    assert dp.weight_gib > plain.weight_gib  # each attention rank holds all attention weights
    assert dp.kv_pool_tokens > 100_000
    assert plain.kv_pool_tokens * 61 * 576 * 2 / GIB == pytest.approx(plain.kv_cache_gib)
