"""The GPU memory split SGLang's startup computes: weights, KV pool, what stays free."""

from __future__ import annotations

from dataclasses import dataclass

from .deployment import Deployment
from .gpu import Gpu
from .model import ModelSpec

GIB = 1024**3
# Before the weights load: CUDA context, cuBLAS handles, allocator slack (~0.6 GiB on an H100);
# tp > 1 adds NCCL and custom all-reduce buffers. Measured as the gap between the card's total
# and the `avail mem` SGLang logs before "Load weight begin".
CUDA_CONTEXT_GIB = 0.6
TP_COMM_GIB = 0.4


@dataclass(frozen=True)
class MemorySplit:
    """One GPU's memory after startup sized the KV pool (GiB; the pool in tokens)."""

    total_gib: float  # usable after the CUDA context and communication buffers
    weight_gib: float
    kv_pool_tokens: int
    kv_cache_gib: float
    free_gib: float  # left for activations, CUDA graphs and workspaces


def weight_bytes_per_gpu(model: ModelSpec, deployment: Deployment) -> float:
    """Weight bytes one GPU holds: attention per attention rank, everything else over tp."""
    width = deployment.weight_bytes_per_param or float(model.dtype_bytes)
    attention = model.attention_params / deployment.attn_tp
    rest = (model.params - model.attention_params) / deployment.tp
    return (attention + rest) * width


def kv_bytes_per_token(model: ModelSpec, deployment: Deployment) -> int:
    """KV cache bytes per token on one GPU (SGLang's cell_size)."""
    return model.kv_bytes_per_token(deployment.attn_tp, deployment.kv_dtype_bytes)


def memory_split(
    gpu: Gpu, model: ModelSpec, deployment: Deployment, mem_fraction_static: float
) -> MemorySplit:
    """Size the KV pool as SGLang does: pool = available after weights - total x (1 - frac).

    ModelRunner.profile_max_num_token / init_memory_pool (0.4.10, 0.5.9), pool_configurator.py
    (0.5.17, 0.5.23).
    """
    comm = TP_COMM_GIB if deployment.tp > 1 else 0.0
    total = gpu.memory_gib - CUDA_CONTEXT_GIB - comm
    weight = weight_bytes_per_gpu(model, deployment) / GIB
    cell = kv_bytes_per_token(model, deployment)
    budget = total - weight - total * (1 - mem_fraction_static)
    tokens = max(int(budget * GIB // cell), 0)
    kv = tokens * cell / GIB
    return MemorySplit(total, weight, tokens, kv, total - weight - kv)


def kv_pool_tokens(
    gpu: Gpu, model: ModelSpec, deployment: Deployment, mem_fraction_static: float
) -> int:
    """max_total_num_tokens of one GPU (one attention rank) at this --mem-fraction-static."""
    return memory_split(gpu, model, deployment, mem_fraction_static).kv_pool_tokens
