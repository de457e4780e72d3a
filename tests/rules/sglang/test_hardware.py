"""GPU and model-size heuristics the rules share."""

import pytest
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.rules.sglang.hardware import GpuFacts, gpu_facts, model_params_billion, weight_gb


@pytest.mark.parametrize(
    ("name", "facts"),
    [
        ("NVIDIA H100 80GB HBM3", GpuFacts("hopper", 80.0)),
        ("NVIDIA H100 NVL", GpuFacts("hopper", 80.0)),
        ("NVIDIA H200", GpuFacts("hopper", 141.0)),
        ("NVIDIA H20", GpuFacts("hopper", 96.0)),
        ("NVIDIA A100-SXM4-40GB", GpuFacts("ampere", 40.0)),
        ("NVIDIA A10G", GpuFacts("ampere", 24.0)),
        ("NVIDIA RTX A4000", GpuFacts("ampere", 16.0)),
        ("NVIDIA L40S", GpuFacts("ada", 48.0)),
        ("NVIDIA L4", GpuFacts("ada", 24.0)),
        ("NVIDIA GeForce RTX 4090", GpuFacts("ada", 24.0)),  # NVIDIA's spec sheet
        ("NVIDIA GeForce RTX 4080 SUPER", GpuFacts("ada", 16.0)),
        ("NVIDIA GeForce RTX 4070 Ti", GpuFacts("ada", None)),  # 12 or 16 GB: said by no name
        ("NVIDIA GeForce RTX 3090", GpuFacts("ampere", 24.0)),
        ("NVIDIA B200", GpuFacts("blackwell", 180.0)),
        ("NVIDIA GB200", GpuFacts("blackwell", 186.0)),
    ],
)
def test_gpu_facts_from_model_name(name, facts):
    assert gpu_facts(name) == facts


def test_gpu_facts_unknown():
    assert gpu_facts("Tesla V100-SXM2-16GB") is None
    assert gpu_facts(None) is None


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", 8.0),
        ("Qwen/Qwen2.5-0.5B-Instruct", 0.5),
        ("Qwen/Qwen3-30B-A3B", 30.0),
        ("mistralai/Mixtral-8x7B-Instruct-v0.1", 56.0),
        ("openai/gpt-oss-120b", 120.0),
        ("/models/custom-finetune", None),
        (None, None),
    ],
)
def test_model_params_billion_from_name(path, params):
    assert model_params_billion(path) == params


def test_weight_gb_prefers_server_info_memory_usage():
    raw = {"internal_states": [{"memory_usage": {"weight": 7.5}}]}
    config = ServerConfig(model_path="/models/x", tp_size=2, raw=raw)
    assert weight_gb(config) == 15.0


def test_weight_gb_from_name_and_quantization():
    assert weight_gb(ServerConfig(model_path="org/Model-70B")) == 140.0
    assert weight_gb(ServerConfig(model_path="org/Model-70B", quantization="fp8")) == 70.0
    assert weight_gb(ServerConfig(model_path="org/Model-70B", quantization="awq")) == 35.0
    assert weight_gb(ServerConfig(model_path="/models/x")) is None
