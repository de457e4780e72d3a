"""The values SGLang resolves for flags left unset, per version, and its CUDA-graph batch sizes."""

from __future__ import annotations

from dataclasses import replace

from sglang_physics import default_backend, default_capture_sizes, prefill_graph_sizes

from .catalogue import Version
from .gpus import Gpu
from .hardware import Knobs
from .llms import LlmSpec

NEW_DEFAULTS_SINCE: Version = (0, 5, 0)  # ServerArgs._handle_gpu_memory_settings (read in 0.5.9)
APPEND_MAX_BS_SINCE: Version = (0, 5, 17)  # the capture list then always ends at max_bs
# 0.5.20 arg_groups/memory_hook.py: 20-35 GB cards (A10, RTX 4090/5090) get a 4096-token chunk
# and graphs up to 48 (160 at tp >= 4), where 0.5.4-0.5.19 gave 2048 and 24 / 80
SMALL_TIER_SINCE: Version = (0, 5, 20)
PREFILL_GRAPHS_SINCE: Version = (0, 5, 10)  # piecewise prefill graphs on by default
GIB_MIB = 1024


def resolve_knobs(knobs: Knobs, gpu: Gpu, version: Version, llm: LlmSpec | None = None) -> Knobs:
    """Fill every "SGLang picks" knob the way ServerArgs.__post_init__ does on this GPU."""
    chunk = knobs.chunked_prefill_size or _default_chunk(gpu, version)
    max_bs = knobs.cuda_graph_max_bs or _default_max_bs(gpu, knobs.tp_size, version)
    backend = knobs.attention_backend or default_backend(gpu, llm or LlmSpec(), version)
    resolved = replace(
        knobs, chunked_prefill_size=chunk, cuda_graph_max_bs=max_bs, attention_backend=backend
    )
    if not knobs.mem_fraction_static:
        fraction = _auto_fraction(resolved, gpu, version, llm or LlmSpec())
        resolved = replace(resolved, mem_fraction_static=fraction)
    return _dp_attention(resolved)


def _dp_attention(knobs: Knobs) -> Knobs:
    """ServerArgs with --enable-dp-attention (every version served): conservativeness x 0.3
    and the chunk split over the DP ranks; /server_info reports the adjusted values."""
    if not knobs.enable_dp_attention:
        return knobs
    chunk = knobs.chunked_prefill_size
    return replace(
        knobs,
        schedule_conservativeness=knobs.schedule_conservativeness * 0.3,
        chunked_prefill_size=chunk // knobs.dp_size if chunk > 0 else chunk,
    )


def _default_chunk(gpu: Gpu, version: Version) -> int:
    """--chunked-prefill-size by GPU memory (MiB thresholds as in server_args.py)."""
    mem = gpu.memory_mib
    if version < NEW_DEFAULTS_SINCE:  # 0.4.10 __post_init__
        return 2048 if mem < 35 * GIB_MIB else 8192 if mem < 160 * GIB_MIB else 16384
    small = 4096 if version >= SMALL_TIER_SINCE else 2048
    bands = ((35, small), (60, 4096), (160, 8192))
    return next((size for limit, size in bands if mem < limit * GIB_MIB), 16384)


def _default_max_bs(gpu: Gpu, tp: int, version: Version) -> int:
    """--cuda-graph-max-bs: 0.4.10 leaves it unset (the largest default capture size wins)."""
    mem = gpu.memory_mib
    if version < NEW_DEFAULTS_SINCE:
        if mem < 35 * GIB_MIB:
            return 8 if tp < 4 else 80
        return max(_old_capture_list(gpu))
    small = (48, 160) if version >= SMALL_TIER_SINCE else (24, 80)
    bands = ((20, 8, 8), (35, *small), (60, 32, 160), (160, 256, 512))
    return next(
        (small if tp < 4 else large for limit, small, large in bands if mem < limit * GIB_MIB),
        512,
    )


def _auto_fraction(knobs: Knobs, gpu: Gpu, version: Version, llm: LlmSpec) -> float:
    """--mem-fraction-static when unset: (GPU memory - reserved) / GPU memory; from 0.5.10 the
    reserve also holds the prefill (piecewise) CUDA graphs, on by default without attention DP
    or torch.compile: 8 MiB per captured token count up to the chunk, 1.5 GiB for MLA models."""
    mem, tp = gpu.memory_mib, knobs.tp_size
    if version < NEW_DEFAULTS_SINCE:  # 0.4.10: reserved GB by memory band
        bands = ((20, 2.8 + tp / 10), (35, 2.8 + tp / 10), (90, 9.5 + tp / 2), (160, 12 + tp / 2))
        gb = next((r for limit, r in bands if mem < limit * GIB_MIB), 32.0)
        return round((mem - gb * 1024) / mem, 3)
    # 0.5.9 _handle_gpu_memory_settings; 0.5.17/0.5.23 move the graph term to reserve_for_graph_mb
    reserved = 512 + max(knobs.chunked_prefill_size, 2048) * 1.5 + knobs.cuda_graph_max_bs * 2
    reserved += tp / 8 * 1024
    if version >= PREFILL_GRAPHS_SINCE and not knobs.enable_dp_attention:
        if not knobs.enable_torch_compile:
            tokens = knobs.chunked_prefill_size
            tokens = tokens if tokens > 0 else knobs.max_prefill_tokens
            reserved += 1.5 * 1024 if llm.is_mla else prefill_graph_sizes(tokens) * 8
    if mem > 60 * GIB_MIB:
        reserved = max(reserved, 10 * 1024)
    return round((mem - reserved) / mem, 3)


def _old_capture_list(gpu: Gpu) -> list[int]:
    """0.4.10 cuda_graph_runner.get_batch_sizes_to_capture, before --cuda-graph-max-bs."""
    sizes = [1, 2, 4, 8, *range(16, 161, 8)]
    if gpu.memory_mib > 90 * 1024:
        sizes += list(range(160, 257, 8))
    if gpu.memory_mib > 160 * 1000:
        sizes += list(range(256, 513, 16))
    return sizes


def capture_batch_sizes(knobs: Knobs, gpu: Gpu, version: Version, max_running: int) -> list[int]:
    """Decode batch sizes SGLang captures a CUDA graph for (knobs resolved)."""
    if knobs.disable_cuda_graph:
        return []
    max_bs = knobs.cuda_graph_max_bs
    if version < NEW_DEFAULTS_SINCE:
        sizes = [b for b in _old_capture_list(gpu) if b <= max_bs]
        if max(sizes) < max_bs:
            sizes += list(range(max(sizes), max_bs + 1, 16))
    else:  # ServerArgs._generate_cuda_graph_batch_sizes (0.5.9), cuda_graph_hook.py (0.5.23)
        sizes = default_capture_sizes(max_bs, append_max_bs=version >= APPEND_MAX_BS_SINCE)
    # CudaGraphRunner's get_batch_sizes_to_capture: a list reaching past the request pool also
    # captures the pool size itself, then drops what is above it (every release).
    if sizes and max(sizes) > max_running:
        sizes.append(max_running)
    return sorted({b for b in sizes if b <= max_running} or {min(max_bs, max_running)})
