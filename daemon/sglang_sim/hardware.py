"""Server flags (Knobs) and the GPU memory plan SGLang's startup computes from them."""

from __future__ import annotations

from dataclasses import dataclass

from .gpus import Gpu
from .llms import LlmSpec

GIB = 1024**3
# Before the weights load: CUDA context, cuBLAS handles, allocator slack (~0.6 GiB on an H100);
# tp > 1 adds NCCL and custom all-reduce buffers. Measured as the gap between the card's total
# and the `avail mem` SGLang logs before "Load weight begin".
CUDA_CONTEXT_GIB = 0.6
TP_COMM_GIB = 0.4
# Attention workspace allocated after the KV pool (SGLANG_FLASHINFER_WORKSPACE_SIZE: 384 MiB).
ATTENTION_WORKSPACE_GIB = 0.375
# CUDA-graph memory: a fixed private pool plus, per captured batch size, its graph's own
# allocations; the largest batch's static buffers (logits in fp32, one layer's activations)
# set the pool size. SGLang's own estimate is 2 MB per batch slot (reserve_for_graph_mb).
GRAPH_FIXED_GIB = 0.1
GRAPH_PER_CAPTURE_MIB = 6.0
CAPTURE_HEADROOM_GIB = 0.3  # working memory torch needs while capturing


@dataclass(frozen=True)
class Knobs:
    """SGLang server flags, by ServerArgs field name. 0 (or None) means "SGLang picks"."""

    mem_fraction_static: float = 0.0  # 0: auto, from GPU memory (defaults.resolve_knobs)
    schedule_conservativeness: float = 1.0
    chunked_prefill_size: int = 0  # 0: auto by GPU memory; -1 disables chunked prefill
    max_prefill_tokens: int = 16384
    max_running_requests: int | None = None
    cuda_graph_max_bs: int = 0  # 0: auto by GPU memory and tp
    schedule_policy: str = "fcfs"
    tp_size: int = 1
    dp_size: int = 1
    decode_log_interval: int = 40
    enable_metrics: bool = True
    kv_cache_dtype: str = "auto"
    quantization: str | None = None
    attention_backend: str | None = None
    enable_torch_compile: bool = False
    torch_compile_max_bs: int = 32
    disable_cuda_graph: bool = False
    disable_radix_cache: bool = False

    @property
    def weight_bytes_per_param(self) -> float:
        """2 for BF16 checkpoints, 1 with --quantization fp8."""
        return 1.0 if self.quantization == "fp8" else 2.0

    @property
    def kv_dtype_bytes(self) -> int:
        """2 for a BF16 KV cache, 1 for --kv-cache-dtype fp8_e4m3 / fp8_e5m2."""
        return 1 if self.kv_cache_dtype.startswith("fp8") else 2


@dataclass(frozen=True)
class MemoryPlan:
    """What startup computes: KV pool size, memory split, free memory, or why it failed."""

    max_total_num_tokens: int
    weight_gb: float
    kv_cache_gb: float
    graph_gb: float
    available_gb: float
    max_running_requests: int
    capture_bs: tuple[int, ...]
    failure: str | None = None  # "no_memory" or "graph_capture": the server cannot start


def plan_memory(gpu: Gpu, llm: LlmSpec, knobs: Knobs, capture_bs: tuple[int, ...]) -> MemoryPlan:
    """Split one GPU's memory as SGLang's startup does (knobs already resolved).

    Pool: ModelRunner.profile_max_num_token / init_memory_pool (0.4.10, 0.5.9),
    pool_configurator.py (0.5.17, 0.5.23): rest = available after weights - total x (1 - frac).
    """
    tp = knobs.tp_size
    total = gpu.memory_gib - CUDA_CONTEXT_GIB - (TP_COMM_GIB if tp > 1 else 0.0)
    weight_gb = llm.weight_bytes(knobs.weight_bytes_per_param) / tp / GIB
    after_weights = total - weight_gb
    cell = llm.kv_bytes_per_token(tp, knobs.kv_dtype_bytes)
    budget = after_weights - total * (1 - knobs.mem_fraction_static)
    tokens = max(int(budget * GIB // cell), 0)
    kv_gb = tokens * cell / GIB
    free = after_weights - kv_gb
    graph_gb = graph_memory_gb(llm, knobs, capture_bs)
    running = max_running(tokens, llm, knobs)
    failure = None
    if tokens <= 0:
        failure = "no_memory"
    elif graph_gb + CAPTURE_HEADROOM_GIB > free:
        failure = "graph_capture"
    available = free - graph_gb - ATTENTION_WORKSPACE_GIB
    return MemoryPlan(tokens, weight_gb, kv_gb, graph_gb, available, running, capture_bs, failure)


def graph_memory_gb(llm: LlmSpec, knobs: Knobs, capture_bs: tuple[int, ...]) -> float:
    """Memory the decode CUDA graphs keep (0 with --disable-cuda-graph)."""
    if knobs.disable_cuda_graph or not capture_bs:
        return 0.0
    per_slot = llm.vocab * 4 + llm.activation_bytes_per_token(knobs.tp_size)
    per_capture = len(capture_bs) * GRAPH_PER_CAPTURE_MIB / 1024
    return GRAPH_FIXED_GIB + per_capture + max(capture_bs) * per_slot / GIB


def max_running(tokens: int, llm: LlmSpec, knobs: Knobs) -> int:
    """Effective --max-running-requests per DP rank.

    req_to_token pool = clamp(tokens / context_len * 512, 2048, 4096) unless the flag is set
    (ModelRunner.init_memory_pool 0.4.10/0.5.9; kv_cache_configurator.resolve_max_num_reqs
    0.5.23), then min(flag or tokens // 2, pool) (TpModelWorker 0.4.10, ModelRunner 0.5.9).
    """
    pool = min(max(int(tokens / llm.context_len * 512), 2048), 4096)
    if knobs.max_running_requests is not None:
        # plain --dp-size runs one full scheduler per replica: the flag is not divided
        return max(min(knobs.max_running_requests, tokens // 2), 1)
    return max(min(pool, tokens // 2), 1)
