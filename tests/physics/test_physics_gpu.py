"""The GPU catalogue and which attention backend each GPU runs, by default and how well."""

from __future__ import annotations

import pytest
from sglang_physics import GPUS, MODELS, backend_efficiency, default_backend, gpu_named


@pytest.mark.parametrize(
    "name", ["A100-40GB", "A100", "H100", "H200", "H20", "B200", "L40S", "L4", "A10", "RTX4090"]
)
def test_catalogue_has_the_gpus_sglang_runs_on(name):
    gpu = GPUS[name]
    assert gpu.memory_gib > 20 and gpu.bandwidth_tb_s > 0.2 and gpu.bf16_tflops > 100
    assert gpu_named(name) is gpu and gpu_named(gpu.name) is gpu


def test_gpu_named_rejects_an_unknown_card():
    with pytest.raises(ValueError, match="unknown GPU"):
        gpu_named("TPUv5")


@pytest.mark.parametrize(
    ("gpu", "model", "backend"),
    [
        ("H100", "llama-3.1-8b", "fa3"),
        ("H200", "deepseek-v3", "fa3"),
        ("B200", "llama-3.1-8b", "trtllm_mha"),
        ("B200", "deepseek-v3", "trtllm_mla"),
        ("A100", "llama-3.1-8b", "flashinfer"),
        ("RTX4090", "qwen3-8b", "flashinfer"),
        ("A100", "deepseek-v3", "triton"),
    ],
)
def test_default_attention_backend_follows_sglang(gpu, model, backend):
    assert default_backend(GPUS[gpu], MODELS[model]) == backend


def test_fa3_runs_on_sm80_to_sm90_not_on_blackwell():
    for name in ("H100", "A100", "L40S", "RTX4090"):
        assert backend_efficiency(GPUS[name], "fa3") > 0
    with pytest.raises(ValueError, match="does not run"):
        backend_efficiency(GPUS["B200"], "fa3")


def test_flashinfer_beats_fa3_on_h20_but_not_on_h100():
    h20, h100 = GPUS["H20"], GPUS["H100"]
    assert backend_efficiency(h20, "flashinfer") > backend_efficiency(h20, "fa3")
    assert backend_efficiency(h100, "fa3") > backend_efficiency(h100, "flashinfer")
