"""Server flags (Knobs) and the GPU memory plan SGLang's startup computes from them."""

from __future__ import annotations

from dataclasses import dataclass

from sglang_physics import Deployment, memory_split

from .gpus import Gpu
from .llms import LlmSpec

GIB = 1024**3
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
    enable_dp_attention: bool = False
    ep_size: int = 1
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
        """1 with --quantization fp8; 0 keeps the checkpoint's width (2 BF16, 1 FP8)."""
        return 1.0 if self.quantization == "fp8" else 0.0

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
    split = memory_split(gpu, llm, deployment_for(knobs), knobs.mem_fraction_static)
    tokens, weight_gb, kv_gb, free = (
        split.kv_pool_tokens,
        split.weight_gib,
        split.kv_cache_gib,
        split.free_gib,
    )
    graph_gb = graph_memory_gb(llm, knobs, capture_bs)
    running = max_running(tokens, llm, knobs)
    failure = None
    if tokens <= 0:
        failure = "no_memory"
    elif graph_gb + CAPTURE_HEADROOM_GIB > free:
        failure = "graph_capture"
    available = free - graph_gb - ATTENTION_WORKSPACE_GIB
    return MemoryPlan(tokens, weight_gb, kv_gb, graph_gb, available, running, capture_bs, failure)


def deployment_for(knobs: Knobs) -> Deployment:
    """The physics' view of the server's flags (knobs resolved)."""
    return Deployment(
        tp=knobs.tp_size,
        dp=knobs.dp_size,
        dp_attention=knobs.enable_dp_attention,
        ep=knobs.ep_size,
        attention_backend=knobs.attention_backend,
        weight_bytes_per_param=knobs.weight_bytes_per_param,
        kv_dtype_bytes=knobs.kv_dtype_bytes,
    )


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
        # plain --dp-size runs one full scheduler per replica: the flag is not divided; with DP
        # attention the ranks share one server's limit (ModelRunner: // dp_size)
        flag = knobs.max_running_requests
        if knobs.enable_dp_attention:
            flag = max(flag // knobs.dp_size, 1)
        return max(min(flag, tokens // 2), 1)
    return max(min(pool, tokens // 2), 1)
