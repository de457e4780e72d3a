"""What the rules may infer about the GPU and the model from names (heuristics, stated as such)."""

import re
from dataclasses import dataclass

from sglang_tuner.model.server_config import ServerConfig


@dataclass(frozen=True, slots=True)
class GpuFacts:
    """A GPU model's generation (for the attention backend) and memory."""

    generation: str  # "hopper", "blackwell", "ampere", "ada"
    memory_gb: float | None


# Name fragment -> (generation, memory GB when the name does not say). First match wins, so the
# longer names come first ("H100" must not catch "GH100" cards, "L40S" before "L40").
_GPUS: tuple[tuple[str, str, float | None], ...] = (
    ("GB300", "blackwell", 288.0),
    ("GB200", "blackwell", 186.0),
    ("B300", "blackwell", 288.0),
    ("B200", "blackwell", 180.0),
    ("B100", "blackwell", 192.0),
    ("GH200", "hopper", 96.0),
    ("H200", "hopper", 141.0),
    ("H100", "hopper", 80.0),
    ("H800", "hopper", 80.0),
    ("H20", "hopper", 96.0),
    ("A100", "ampere", 80.0),
    ("A800", "ampere", 80.0),
    ("A6000", "ampere", 48.0),
    ("A4000", "ampere", 16.0),
    ("A40", "ampere", 48.0),
    ("A30", "ampere", 24.0),
    ("A10", "ampere", 24.0),
    ("RTX 3090", "ampere", 24.0),
    ("RTX 30", "ampere", None),
    ("L40S", "ada", 48.0),
    ("L40", "ada", 48.0),
    ("L4", "ada", 24.0),
    ("RTX 6000 ADA", "ada", 48.0),
    ("RTX 4090", "ada", 24.0),
    ("RTX 4080", "ada", 16.0),
    ("RTX 40", "ada", None),
)
_MEMORY_RE = re.compile(r"(\d+)\s*GB", re.IGNORECASE)
# "Llama-3.1-8B-Instruct" -> 8, "Qwen2.5-0.5B" -> 0.5, "Mixtral-8x7B" -> 56 (experts x size).
_PARAMS_RE = re.compile(r"(?:(\d+)x)?(\d+(?:\.\d+)?)\s*B(?![a-z])", re.IGNORECASE)
# Bytes per weight by --quantization (unquantized checkpoints are bf16/fp16: 2 bytes).
_BYTES_PER_PARAM = {"fp8": 1.0, "w8a8_fp8": 1.0, "modelopt_fp8": 1.0, "w8a8_int8": 1.0}
_FOUR_BIT = ("awq", "gptq", "marlin", "modelopt_fp4", "mxfp4", "bitsandbytes")


def gpu_facts(gpu_model: str | None) -> GpuFacts | None:
    """Generation and memory from a model name like 'NVIDIA H100 80GB HBM3'; None if unknown."""
    if not gpu_model:
        return None
    name = gpu_model.upper()
    for fragment, generation, memory_gb in _GPUS:
        if fragment in name:
            stated = _MEMORY_RE.search(gpu_model)
            return GpuFacts(generation, float(stated.group(1)) if stated else memory_gb)
    return None


def gpu_memory_gb(config: ServerConfig | None) -> float | None:
    """Total memory of one GPU of the target, from its model name."""
    facts = gpu_facts(config.gpu_model if config else None)
    return facts.memory_gb if facts else None


def model_params_billion(model_path: str | None) -> float | None:
    """Parameter count from the model name ('…-8B-…'); the largest figure wins (MoE '30B-A3B')."""
    if not model_path:
        return None
    name = model_path.rsplit("/", 1)[-1]
    sizes = [
        float(size) * (int(experts) if experts else 1) for experts, size in _PARAMS_RE.findall(name)
    ]
    return max(sizes) if sizes else None


def weight_gb(config: ServerConfig) -> float | None:
    """Whole-model weight memory: /server_info's per-GPU figure x tp, else name x dtype bytes."""
    per_gpu = _reported_weight_gb(config)
    if per_gpu is not None:
        return per_gpu * (config.tp_size or 1)
    params = model_params_billion(config.model_path)
    if params is None:
        return None
    quant = (config.quantization or "").lower()
    per_param = 0.5 if quant in _FOUR_BIT else _BYTES_PER_PARAM.get(quant, 2.0)
    return params * per_param


def _reported_weight_gb(config: ServerConfig) -> float | None:
    """`internal_states[0].memory_usage.weight` (GB per GPU, SGLang >= 0.4.10)."""
    states = config.raw.get("internal_states")
    if not isinstance(states, list) or not states or not isinstance(states[0], dict):
        return None
    usage = states[0].get("memory_usage")
    weight = usage.get("weight") if isinstance(usage, dict) else None
    return float(weight) if isinstance(weight, int | float) and weight > 0 else None
