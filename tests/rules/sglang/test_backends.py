"""Attention backends: SGLang's own pick per version and GPU, and who chose the running one."""

import pytest
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.rules.sglang.backends import (
    BackendChoice,
    auto_backend,
    backend_choice,
    is_hybrid_attention,
    is_mla_or_nsa,
    may_advise_backend,
)


@pytest.mark.parametrize(
    ("model", "architecture", "expected"),
    [
        ("deepseek-ai/DeepSeek-V3", None, True),
        ("deepseek-ai/DeepSeek-R1-0528", None, True),
        ("deepseek-ai/DeepSeek-V3.2-Exp", None, True),  # NSA
        ("deepseek-ai/DeepSeek-Coder-V2-Lite-Instruct", None, True),
        ("moonshotai/Kimi-K2-Instruct", None, True),
        ("zai-org/GLM-5", None, True),  # DSA
        ("deepseek-ai/DeepSeek-R1-Distill-Llama-8B", None, False),  # a Llama
        ("meta-llama/Llama-3.1-8B-Instruct", None, False),
        ("/models/custom", "DeepseekV3ForCausalLM", True),  # architecture wins over the name
        ("deepseek-v3-but-not", "LlamaForCausalLM", False),
        (None, None, False),
    ],
)
def test_is_mla_or_nsa(model, architecture, expected):
    assert is_mla_or_nsa(model, architecture) is expected


def test_hybrid_models_by_name():
    assert is_hybrid_attention("Qwen/Qwen3-Next-80B-A3B-Instruct")
    assert is_hybrid_attention("nvidia/NVIDIA-Nemotron-Nano-9B-v2")
    assert not is_hybrid_attention("Qwen/Qwen3-32B")


@pytest.mark.parametrize(
    ("version", "hopper", "blackwell", "blackwell_mla"),
    [
        ("0.4.5", "flashinfer", "flashinfer", "triton"),
        ("0.4.6", "fa3", "flashinfer", "triton"),
        ("0.4.7", "fa3", "flashinfer", "flashinfer"),
        ("0.5.6", "fa3", "flashinfer", "flashinfer"),
        ("0.5.6.post1", "fa3", "trtllm_mha", "flashinfer"),
        ("0.5.23", "fa3", "trtllm_mha", "flashinfer"),
    ],
)
def test_auto_backend_per_generation(version, hopper, blackwell, blackwell_mla):
    assert auto_backend(version, "hopper") == hopper
    assert auto_backend(version, "blackwell") == blackwell
    assert auto_backend(version, "blackwell", mla=True) == blackwell_mla
    assert auto_backend(version, "ampere") == "flashinfer"
    assert auto_backend(version, "ada", mla=True) == "triton"


def _config(version, top, resolved="fa3", model="meta-llama/Llama-3.1-8B", command=None):
    raw = {"attention_backend": top}
    if command is not None:
        raw["launch_command"] = command
    return ServerConfig(version=version, model_path=model, attention_backend=resolved, raw=raw)


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        # 0.4.7 - 0.5.4: ModelRunner resolved it in the scheduler; the top level stays null.
        (_config("0.4.10", None), BackendChoice.SGLANG),
        (_config("0.5.4", None), BackendChoice.SGLANG),
        (_config("0.4.10", "flashinfer", "flashinfer"), BackendChoice.UNKNOWN),
        # 0.5.4.post1 - 0.5.19: ServerArgs resolves it; both levels show it.
        (_config("0.5.9", "fa3"), BackendChoice.UNKNOWN),
        # 0.5.20+: launch_command says whether the flag was given.
        (_config("0.5.20", "fa3", command="--model-path m"), BackendChoice.SGLANG),
        (_config("0.5.23", "triton", "triton", command="--attention-backend triton"),
         BackendChoice.USER),
        (_config("0.5.23", "fa3", command="--decode-attention-backend fa3"), BackendChoice.USER),
        # MLA/NSA/hybrid models and model-specific backends: never override.
        (_config("0.5.23", "triton", "triton", model="deepseek-ai/DeepSeek-V3",
                 command="--attention-backend triton"), BackendChoice.MODEL_SPECIFIC),
        (_config("0.5.9", "nsa", "nsa", model="/models/x"), BackendChoice.MODEL_SPECIFIC),
        (_config("0.5.9", "fa3", model="Qwen/Qwen3-Next-80B-A3B"), BackendChoice.MODEL_SPECIFIC),
    ],
)  # fmt: skip
def test_backend_choice(config, expected):
    assert backend_choice(config) is expected


def test_may_advise_backend_only_for_choices_not_sglangs():
    by_hand = _config("0.5.23", "triton", "triton", command="--attention-backend triton")
    assert may_advise_backend(by_hand, "hopper")
    assert not may_advise_backend(_config("0.5.20", "fa3", command="--model-path m"), "hopper")
    assert not may_advise_backend(_config("0.4.10", None), "hopper")
    kimi = _config("0.5.9", "fa3", model="moonshotai/Kimi-K2-Instruct")
    assert not may_advise_backend(kimi, "hopper")


def test_may_advise_backend_when_unknown_only_off_sglangs_generic_pick():
    triton = _config("0.5.9", "triton", "triton")
    assert may_advise_backend(triton, "hopper")  # SGLang would have picked fa3
    assert not may_advise_backend(_config("0.5.9", "fa3"), "hopper")
    assert not may_advise_backend(_config("0.5.6", "flashinfer", "flashinfer"), "blackwell")
    assert not may_advise_backend(triton, None)  # GPU unknown
    speculative = ServerConfig(
        version="0.5.9",
        attention_backend="triton",
        raw={"attention_backend": "triton", "speculative_algorithm": "EAGLE"},
    )
    assert not may_advise_backend(speculative, "hopper")  # fmt: skip
