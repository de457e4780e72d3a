"""The `--mem-fraction-static` steps the memory advice takes: up by the startup surplus over the
target, down by the shortfall under it, else one step down the guide's 0.8 / 0.7 ladder."""

import math

from sglang_tuner.model.advice import Action
from sglang_tuner.rules.base import RuleInput, flag_action
from sglang_tuner.rules.free_memory import startup_available_gb, surplus_memory
from sglang_tuner.rules.sglang.hardware import gpu_memory_gb

MEM_FLAG = "--mem-fraction-static"
# With the GPU unknown, size the step for the largest GPU we know: the smallest, safest step.
LARGEST_GPU_GB = 288.0


def _mem_fraction(inp: RuleInput) -> float | None:
    return inp.config.mem_fraction_static if inp.config else None


def _floor2(value: float) -> float:
    return math.floor(value * 100 + 1e-9) / 100


def raise_mem_fraction(inp: RuleInput) -> Action:
    """current + (free - target) / GPU memory: hand the surplus to the KV pool, capped."""
    surplus = surplus_memory(inp)
    th, free = inp.thresholds, surplus[0] if surplus else 0.0
    total = gpu_memory_gb(inp.config)
    delta = _floor2((free - th["available_gpu_mem_target_gb"]) / (total or LARGEST_GPU_GB))
    delta = max(0.01, delta)  # the guide's own step is 0.01
    gpu_note = (
        ""
        if total
        else f"GPU memory unknown (set gpu_model or dcgm_url): sized for {LARGEST_GPU_GB:g} GB"
    )
    current = _mem_fraction(inp)
    if current is None:
        why = inp.config_error or "/server_info did not report it"
        note = f"current value unknown ({why})" + (f"; {gpu_note}" if gpu_note else "")
        return Action(f"{MEM_FLAG}: raise by {delta:g}", MEM_FLAG, None, f"+{delta:g}", note)
    suggested = min(th["mem_fraction_max"], round(current + delta, 2))
    if suggested <= current:
        return Action(f"{MEM_FLAG} is already {current:g}, the most this advice goes to")
    action = flag_action(MEM_FLAG, current, suggested, inp)
    return Action(action.text, MEM_FLAG, action.current, action.suggested, gpu_note)


def lower_mem_fraction(inp: RuleInput) -> Action:
    """Back into the 5-8 GB band when the shortfall is known, else the guide's 0.8 / 0.7."""
    th, free, total = inp.thresholds, startup_available_gb(inp), gpu_memory_gb(inp.config)
    current = _mem_fraction(inp)
    if current is None or free is None or total is None:
        return _mem_fraction_ladder(inp)
    if free >= th["available_gpu_mem_too_low_gb"]:
        return _mem_fraction_ladder(inp)
    shortfall = math.ceil((th["available_gpu_mem_target_gb"] - free) / total * 100 - 1e-9) / 100
    suggested = max(th["mem_fraction_floor"], _floor2(current - shortfall))
    if suggested >= current:
        return _mem_fraction_ladder(inp)
    return flag_action(MEM_FLAG, current, suggested, inp)


def _mem_fraction_ladder(inp: RuleInput) -> Action:
    """One step down the guide's ladder (0.8, then 0.7); past 0.7 other knobs take over."""
    current = _mem_fraction(inp)
    steps = sorted((inp.thresholds["mem_fraction_step_1"], inp.thresholds["mem_fraction_floor"]))
    if current is None:
        return flag_action(MEM_FLAG, None, steps[-1], inp)
    below = [s for s in steps if s < current - 1e-9]
    if not below:
        return Action(
            f"{MEM_FLAG} is already {current:g}: lower --chunked-prefill-size, "
            "--cuda-graph-max-bs or --max-running-requests instead"
        )
    return flag_action(MEM_FLAG, current, below[-1], inp)
