"""The accelerators SGLang runs on: memory, bandwidth, dense compute, links, architecture."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class Gpu:
    """One accelerator, as its datasheet and torch.cuda describe it.

    memory_gib is the total capacity torch reports (OOM messages, `mem_get_info`), a little
    less than the marketing figure. FLOPs are dense (no 2:4 sparsity) with FP32 accumulation.
    fp8_tflops is 0 where the tensor cores have no FP8 (FP8 checkpoints then run as weight-only
    FP8 with BF16 math). link_gb_s is the per-GPU all-reduce bus bandwidth in one direction
    (NVLink, or PCIe where there is none). arch picks SGLang's defaults and kernels: ampere
    (sm80/86), ada (sm89), hopper (sm90), blackwell (sm100).
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

    @property
    def has_nvlink(self) -> bool:
        """True where GPUs talk over NVLink (custom all-reduce), not PCIe."""
        return self.link_gb_s >= 100


# Sources: NVIDIA datasheets (dense figures; the sparse ones are twice these).
# A100 SXM (A100 datasheet): 40 GB HBM2 at 1,555 GB/s or 80 GB HBM2e at 2,039 GB/s, 312 TFLOPS
#   BF16, no FP8, NVLink 600 GB/s (300 one way).
# H100 SXM (H100 datasheet): 80 GB HBM3 at 3.35 TB/s, 989 BF16 / 1,979 FP8, NVLink 900 GB/s.
# H200 SXM (H200 datasheet): 141 GB HBM3e at 4.8 TB/s, H100's compute and NVLink.
# H20 (NVIDIA H20 product brief; no public datasheet page): 96 GB HBM3 at 4.0 TB/s, 148 BF16 /
#   296 FP8, NVLink 900 GB/s. A Hopper die with a fraction of the H100's tensor cores.
# B200 (HGX B200 datasheet, 1.44 TB and 64 TB/s per 8 GPUs): 180 GB at 8 TB/s, 2.25 PFLOPS BF16 /
#   4.5 PFLOPS FP8, NVLink 1.8 TB/s.
# L40S (L40S datasheet): 48 GB GDDR6 at 864 GB/s, 362 BF16 / 733 FP8, PCIe Gen4 x16 (64 GB/s).
# L4 (L4 datasheet): 24 GB GDDR6 at 300 GB/s, 121 BF16 / 242 FP8, PCIe Gen4 x16.
# A10 (A10 datasheet): 24 GB GDDR6 at 600 GB/s, 125 BF16, no FP8, PCIe Gen4 x16.
# RTX 4090 (Ada Lovelace architecture whitepaper, appendix table): 24 GB GDDR6X at 1,008 GB/s,
#   165.2 BF16 and 330.3 FP8 with FP32 accumulation (GeForce halves that rate), PCIe Gen4 x16.
# PCIe links count 32 GB/s one way. memory_gib of the 24-96 GB cards is the usual torch figure
# for the card (A100 40GB 39.39, RTX 4090 23.65 GiB); L4, A10 and H20 are estimates from their
# MiB totals.
GPUS: Mapping[str, Gpu] = MappingProxyType(
    {
        "A100-40GB": Gpu("NVIDIA A100-SXM4-40GB", 39.39, 1.555, 312.0, 0.0, 300.0, "ampere"),
        "A100": Gpu("NVIDIA A100-SXM4-80GB", 79.15, 2.039, 312.0, 0.0, 300.0, "ampere"),
        "H100": Gpu(),
        "H200": Gpu("NVIDIA H200", 139.81, 4.8, 989.0, 1979.0, 450.0, "hopper"),
        "H20": Gpu("NVIDIA H20", 95.0, 4.0, 148.0, 296.0, 450.0, "hopper"),
        "B200": Gpu("NVIDIA B200", 178.35, 8.0, 2250.0, 4500.0, 900.0, "blackwell"),
        "L40S": Gpu("NVIDIA L40S", 44.39, 0.864, 362.0, 733.0, 32.0, "ada"),
        "L4": Gpu("NVIDIA L4", 22.03, 0.3, 121.0, 242.0, 32.0, "ada"),
        "A10": Gpu("NVIDIA A10", 22.03, 0.6, 125.0, 0.0, 32.0, "ampere"),
        "RTX4090": Gpu("NVIDIA GeForce RTX 4090", 23.65, 1.008, 165.2, 330.3, 32.0, "ada"),
    }
)


def gpu_named(name: str) -> Gpu:
    """A GPU by its short name (H100, A100-40GB, RTX4090, ...) or its full reported name."""
    wanted = name.upper().replace(" ", "")
    for key, gpu in GPUS.items():
        if wanted in (key, key.replace("-", "")) or name == gpu.name:
            return gpu
    raise ValueError(f"unknown GPU {name!r}; choose from {', '.join(GPUS)}")
