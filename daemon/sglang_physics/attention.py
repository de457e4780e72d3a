"""Attention backends: which a GPU runs, SGLang's default, how fast they read the KV cache."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from .gpu import Gpu
from .model import ModelSpec

# KV-read efficiency of paged decode attention, relative to the HBM efficiency of the step model
# (0.85 of peak). Anchors: the H200 measurement (gpu-physics.md: cuDNN GQA decode reads KV at
# 0.81 of 4.8 TB/s, FA2 at ~0.5) puts the best Hopper kernel at ~1.0 here; the guide names fa3
# the fastest on Hopper. flashinfer 0.95, triton 0.8, torch_native 0.3 and every non-Hopper
# value are assumptions (no measurement at hand), kept from the simulator's first calibration.
# fa3 runs on sm80-sm90 (0.5.20 attention_registry.create_flashattention_v3_backend: major 8
# without MLA, or 9), not sm100; on sm8x it is taken as fast as flashinfer (an assumption, no
# measurement). trtllm_mha/trtllm_mla need sm100 (Blackwell); flashmla sm90/sm100.
_COMMON = {"flashinfer": 0.95, "triton": 0.8, "torch_native": 0.3}
BACKEND_EFFICIENCY: Mapping[str, Mapping[str, float]] = MappingProxyType(
    {
        "hopper": {"fa3": 1.0, "flashmla": 1.0, **_COMMON},
        "blackwell": {"trtllm_mha": 1.0, "trtllm_mla": 1.0, "flashmla": 1.0, **_COMMON},
        "ampere": {"fa3": 0.95, **_COMMON},
        "ada": {"fa3": 0.95, **_COMMON},
    }
)
# Architectures whose fa3 serves MHA/GQA only (no MLA): SM8x.
FA3_WITHOUT_MLA = frozenset({"ampere", "ada"})
# Per-card exceptions. H20: fa3 decode is well behind flashinfer on this compute-starved Hopper
# (sgl-project/sglang#5630: QwQ-32B tp4, batch 64 x 12k input, 908 vs 2,014 tok/s decode;
# #6151: Qwen3-235B tp8 decode attention kernel 98 us with fa3 vs 35 us with flashinfer, while
# fa3 prefill is faster). 0.95 x 35/98 = 0.34. Measured in April-May 2025; later releases may
# have narrowed the gap.
GPU_EFFICIENCY: Mapping[str, Mapping[str, float]] = MappingProxyType({"NVIDIA H20": {"fa3": 0.34}})


def supported_backends(gpu: Gpu) -> tuple[str, ...]:
    """Attention backends SGLang can run on this GPU."""
    return tuple(BACKEND_EFFICIENCY.get(gpu.arch, _COMMON))


def default_backend(gpu: Gpu, model: ModelSpec, version: tuple[int, ...] = (0, 5, 23)) -> str:
    """What SGLang picks without --attention-backend (ModelRunner.model_specific_adjustment,
    ServerArgs._handle_attention_backend_compatibility): fa3 on Hopper for MHA and MLA models;
    on Blackwell trtllm_mha (trtllm_mla for MLA) from 0.5.9; elsewhere flashinfer, or triton for
    MLA."""
    if gpu.arch == "hopper":
        return "fa3"
    if gpu.arch == "blackwell" and version >= (0, 5, 9):
        return "trtllm_mla" if model.is_mla else "trtllm_mha"
    return "triton" if model.is_mla else "flashinfer"


def backend_efficiency(gpu: Gpu, backend: str) -> float:
    """KV-read efficiency of `backend` on `gpu`; ValueError where the GPU cannot run it."""
    table = BACKEND_EFFICIENCY.get(gpu.arch, _COMMON)
    if backend not in table:
        supported = ", ".join(table)
        raise ValueError(f"attention backend {backend} does not run on {gpu.name} ({supported})")
    return GPU_EFFICIENCY.get(gpu.name, {}).get(backend, table[backend])
