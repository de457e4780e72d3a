"""GPU memory plan and step-time model of one simulated SGLang server."""

from __future__ import annotations

import math
from dataclasses import dataclass

GIB = 1024**3


@dataclass(frozen=True)
class Gpu:
    """One accelerator: memory, bandwidth and dense compute."""

    name: str = "NVIDIA H100 80GB HBM3"
    memory_gb: float = 79.6
    bandwidth_tb_s: float = 3.35
    tflops: float = 600.0


@dataclass(frozen=True)
class LlmSpec:
    """The served model: size, KV bytes per token (whole model) and activation appetite."""

    path: str = "meta-llama/Llama-3.1-8B-Instruct"
    architecture: str = "LlamaForCausalLM"
    params_b: float = 8.0
    kv_bytes_per_token: int = 131072
    context_len: int = 131072
    activation_gb_per_1k_tokens: float = 0.25


@dataclass(frozen=True)
class Knobs:
    """The server flags the tuning guide talks about (resolved values)."""

    mem_fraction_static: float = 0.85
    schedule_conservativeness: float = 1.0
    chunked_prefill_size: int = 8192
    max_prefill_tokens: int = 16384
    max_running_requests: int | None = None
    cuda_graph_max_bs: int = 256
    schedule_policy: str = "fcfs"
    tp_size: int = 1
    dp_size: int = 1
    decode_log_interval: int = 40
    enable_metrics: bool = True


@dataclass(frozen=True)
class MemoryPlan:
    """What startup computes: KV pool size, memory split and the free memory left over."""

    max_total_num_tokens: int
    weight_gb: float
    kv_cache_gb: float
    graph_gb: float
    available_gb: float
    max_running_requests: int


CUDA_CONTEXT_GB = 1.1  # CUDA context, NCCL buffers and allocator slack outside the static pool.


def plan_memory(gpu: Gpu, llm: LlmSpec, knobs: Knobs) -> MemoryPlan:
    """Derive the KV pool and free memory like SGLang's startup does, per GPU."""
    tp = knobs.tp_size
    weight_gb = llm.params_b * 2 / tp * 1e9 / GIB
    static_gb = gpu.memory_gb * knobs.mem_fraction_static
    kv_gb = max(static_gb - weight_gb, 0.0)
    tokens = int(kv_gb * GIB / (llm.kv_bytes_per_token / tp))
    graph_gb = 0.35 + knobs.cuda_graph_max_bs * 0.004
    available = gpu.memory_gb - static_gb - graph_gb - CUDA_CONTEXT_GB
    auto_running = min(4096, max(tokens // 512, 1))
    running = knobs.max_running_requests or auto_running
    return MemoryPlan(tokens, weight_gb, kv_gb, graph_gb, available, running)


def decode_step_seconds(gpu: Gpu, llm: LlmSpec, knobs: Knobs, batch: int, seq_sum: int) -> float:
    """Time of one decode step: weights and KV read from HBM, plus launch overheads."""
    tp = knobs.tp_size
    bandwidth = gpu.bandwidth_tb_s * 1e12
    weights = llm.params_b * 2e9 / tp / bandwidth
    kv = seq_sum * llm.kv_bytes_per_token / tp / bandwidth
    comm = 0.0015 * math.log2(tp) if tp > 1 else 0.0
    step = 0.002 + weights + kv + comm + batch * 1.5e-5
    if batch > knobs.cuda_graph_max_bs:
        step = step * 1.15 + 0.006  # eager kernel launches when the batch has no captured graph
    return step


def prefill_seconds(gpu: Gpu, llm: LlmSpec, knobs: Knobs, new_tokens: int, cached: int) -> float:
    """Time of one prefill batch: dense compute on the new tokens plus a prefix-attention term."""
    flops = 2 * llm.params_b * 1e9 * new_tokens
    compute = flops / (gpu.tflops * 1e12 * knobs.tp_size)
    return 0.004 + compute + cached * 2e-8


def activation_gb(llm: LlmSpec, knobs: Knobs, tokens: int) -> float:
    """Transient GPU memory a forward pass over this many tokens needs, per GPU."""
    return tokens / 1000 * llm.activation_gb_per_1k_tokens / knobs.tp_size
