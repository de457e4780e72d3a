"""The GPU memory a server left free: startup `available_gpu_mem`, else DCGM's free memory."""

from sglang_tuner.model.signals import GPU_FB_FREE_GB, STARTUP_AVAILABLE_GPU_MEM_GB
from sglang_tuner.rules.base import RuleInput


def startup_available_gb(inp: RuleInput) -> float | None:
    """The guide's `available_gpu_mem`: metrics/log signal first, then /server_info."""
    value = inp.view.last(STARTUP_AVAILABLE_GPU_MEM_GB)
    if value is None and inp.config is not None:
        value = inp.config.startup_available_gpu_mem_gb
    return value


def surplus_memory(inp: RuleInput) -> tuple[float, str] | None:
    """(free GB, what says so): startup available_gpu_mem, else the DCGM exporter's free
    framebuffer, lowest over the window (a running server only ever holds more than at startup,
    so this never overstates the surplus)."""
    value = startup_available_gb(inp)
    if value is not None:
        return value, "startup available_gpu_mem"
    dcgm = inp.view.min(GPU_FB_FREE_GB)
    return None if dcgm is None else (dcgm, "free GPU memory (DCGM), lowest over the window")
