"""The accelerators a simulated server can run on: memory, bandwidth, dense compute, links."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class Gpu:
    """One accelerator, as the datasheet and torch.cuda describe it.

    memory_gib is the total capacity torch reports (OOM messages, `mem_get_info`), a little
    less than the marketing figure. FLOPs are dense (no 2:4 sparsity). fp8_tflops is 0 where the
    tensor cores have no FP8 (FP8 checkpoints then run as weight-only FP8 with BF16 math).
    link_gb_s is the per-GPU all-reduce bus bandwidth (NVLink, or PCIe where there is none).
    """

    name: str = "NVIDIA H100 80GB HBM3"
    memory_gib: float = 79.19
    bandwidth_tb_s: float = 3.35
    bf16_tflops: float = 989.0
    fp8_tflops: float = 1979.0
    link_gb_s: float = 450.0
    arch: str = "hopper"

    @property
    def memory_mib(self) -> int:
        """What SGLang's get_device_memory_capacity() returns (MiB); its defaults key on it."""
        return int(self.memory_gib * 1024)


# Sources: NVIDIA datasheets. A100 80GB SXM: 2,039 GB/s HBM2e, 312 TFLOPS BF16 dense, no FP8,
# NVLink 600 GB/s. H100 SXM: 3.35 TB/s HBM3, 989 TFLOPS BF16 / 1,979 FP8 dense, NVLink 900 GB/s.
# H200 SXM: 141 GB HBM3e at 4.8 TB/s, H100's compute and NVLink. B200 (HGX B200, 1.44 TB and
# 64 TB/s per 8 GPUs): 180 GB at 8 TB/s, 2.25 PFLOPS BF16 / 4.5 PFLOPS FP8 dense, NVLink 1.8 TB/s.
# L40S: 48 GB GDDR6 at 864 GB/s, 362 TFLOPS BF16 / 733 FP8 dense, PCIe Gen4 x16 (64 GB/s), no
# NVLink. Link bandwidth here is one direction (half the bidirectional NVLink figure).
GPUS: Mapping[str, Gpu] = MappingProxyType(
    {
        "A100": Gpu("NVIDIA A100-SXM4-80GB", 79.15, 2.039, 312.0, 0.0, 300.0, "ampere"),
        "H100": Gpu(),
        "H200": Gpu("NVIDIA H200", 139.81, 4.8, 989.0, 1979.0, 450.0, "hopper"),
        "B200": Gpu("NVIDIA B200", 178.35, 8.0, 2250.0, 4500.0, 900.0, "blackwell"),
        "L40S": Gpu("NVIDIA L40S", 44.39, 0.864, 362.0, 733.0, 32.0, "ada"),
    }
)


def gpu_named(name: str) -> Gpu:
    """A GPU by its short name (A100, H100, H200, B200, L40S) or its full reported name."""
    for key, gpu in GPUS.items():
        if name.upper() == key or name == gpu.name:
            return gpu
    raise ValueError(f"unknown GPU {name!r}; choose from {', '.join(GPUS)}")
