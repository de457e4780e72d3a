"""Attention backends (sglang_physics/attention.py): what runs where, SGLang's default, speed."""

import pytest
from sglang_physics import GPUS, MODELS, backend_efficiency, default_backend, supported_backends


def test_fa3_runs_on_sm80_to_sm90_and_trtllm_on_blackwell_only():
    assert "fa3" in supported_backends(GPUS["H100"])
    assert "fa3" in supported_backends(GPUS["A100"])
    assert "fa3" in supported_backends(GPUS["L40S"])
    assert "fa3" not in supported_backends(GPUS["B200"])
    assert "trtllm_mha" in supported_backends(GPUS["B200"])
    assert "trtllm_mha" not in supported_backends(GPUS["H100"])
    with pytest.raises(ValueError, match="attention backend fa3 does not run on"):
        backend_efficiency(GPUS["B200"], "fa3")


def test_sglangs_default_backend_per_gpu_model_and_version():
    llama, deepseek = MODELS["llama-3.1-8b"], MODELS["deepseek-v3"]
    assert default_backend(GPUS["H100"], llama) == "fa3"
    assert default_backend(GPUS["B200"], llama) == "trtllm_mha"
    assert default_backend(GPUS["B200"], deepseek) == "trtllm_mla"
    assert default_backend(GPUS["B200"], llama, version=(0, 5, 3)) == "flashinfer"  # before 0.5.9
    assert default_backend(GPUS["L40S"], llama) == "flashinfer"
    assert default_backend(GPUS["A100"], deepseek) == "triton"  # MLA off Hopper/Blackwell


def test_flashinfer_beats_fa3_on_the_h20_as_measured_and_not_on_the_h100():
    # sgl-project/sglang#5630 and #6151: fa3 decode attention ~2.8x slower than flashinfer on H20
    h20, h100 = GPUS["H20"], GPUS["H100"]
    assert backend_efficiency(h20, "fa3") < backend_efficiency(h20, "flashinfer")
    assert backend_efficiency(h100, "fa3") >= backend_efficiency(h100, "flashinfer")
