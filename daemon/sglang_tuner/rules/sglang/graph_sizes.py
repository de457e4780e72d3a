"""The decode batch sizes SGLang captures CUDA graphs for, and the size a batch is padded to.

A decode batch replays the smallest captured graph at least as large as the batch
(`bisect_left` in the CUDA-graph runner's replay, every release); a batch above the largest
runs without a graph. The lists assume no speculative decoding (it captures a denser list),
padding allowed (`--disable-cuda-graph-padding` off) and no DP-attention alignment.
"""

import bisect
import math

from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.rules.sglang import hardware
from sglang_tuner.rules.sglang.defaults import (
    RUNNER_BASE,
    default_graph_max_bs,
    runner_default_sizes,
)
from sglang_tuner.rules.sglang.versions import in_span

# 0.5.3 moved the list into `ServerArgs._generate_cuda_graph_batch_sizes` (0.5.14:
# `_generate_decode_cuda_graph_batch_sizes`; 0.5.19: `arg_groups/cuda_graph_hook.py`).
LIST_FROM_MAX_BS = "0.5.3"
# 0.5.10: the list gains max_bs itself when it is off the grid ("if max_bs not in capture_bs").
MAX_BS_ALWAYS_CAPTURED = "0.5.10"
# 0.4.7: `get_batch_sizes_to_capture` extends the list up to a larger max bs in steps of 16.
RUNNER_EXTENDS_TO_MAX_BS = "0.4.7"


def _from_max_bs(version: str | None, max_bs: int) -> list[int]:
    """0.5.3+: the fixed grid cut at max_bs."""
    grid = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 512, 16), *range(512, max_bs + 1, 32)]
    sizes = [s for s in grid if s <= max_bs]
    if in_span(version, MAX_BS_ALWAYS_CAPTURED) and max_bs not in sizes:
        sizes.append(max_bs)
    return sizes


def _from_runner(
    version: str | None, max_bs: int | None, gpu_memory_gb: float | None
) -> list[int] | None:
    """Before 0.5.3: the runner's own list (bigger on big GPUs), cut at a set max bs."""
    if gpu_memory_gb is None and (max_bs is None or max_bs > max(RUNNER_BASE)):
        return None  # the big-GPU additions decide the list
    sizes = list(runner_default_sizes(version, gpu_memory_gb or 0.0))
    if max_bs is None:
        return sizes
    sizes = [s for s in sizes if s <= max_bs]
    if in_span(version, RUNNER_EXTENDS_TO_MAX_BS) and max(sizes) < max_bs:
        sizes += range(max(sizes), max_bs + 1, 16)
    return sizes


def captured_batch_sizes(
    version: str | None,
    max_bs: int | None,
    *,
    gpu_memory_gb: float | None = None,
    tp_size: int | None = None,
    pool_size: int | None = None,
) -> tuple[int, ...] | None:
    """The decode batch sizes captured per DP rank, ascending; None when unknowable.

    `max_bs` is `ServerConfig.cuda_graph_max_bs` (None: SGLang's default for the GPU and tp).
    `pool_size`, the request slots per DP rank, cuts the list and is itself captured when the
    list reached past it (`get_batch_sizes_to_capture`, every release). 0.4.6 adds its big-GPU
    sizes only with dp_size 1; that condition is not modelled.
    """
    if in_span(version, LIST_FROM_MAX_BS):
        top = max_bs or default_graph_max_bs(version, gpu_memory_gb, tp_size)
        sizes = _from_max_bs(version, top) if top else None
    else:
        sizes = _from_runner(version, max_bs, gpu_memory_gb)
    if sizes is None:
        return None
    if pool_size is not None and max(sizes) > pool_size:
        sizes = [s for s in sizes if s <= pool_size] + [pool_size]
    return tuple(sorted(set(sizes)))


def round_up_to_captured(batch: int, sizes: tuple[int, ...]) -> int | None:
    """The captured size a decode batch of `batch` requests is padded to; None: no graph."""
    index = bisect.bisect_left(sizes, max(batch, 1))
    return sizes[index] if index < len(sizes) else None


def padding_ratio(batch: int, sizes: tuple[int, ...]) -> float | None:
    """Share of a replayed graph's rows that are padding (0 when the size fits exactly)."""
    padded = round_up_to_captured(batch, sizes)
    return None if padded is None or batch <= 0 else (padded - batch) / padded


def graph_bs_for(batch: float, config: ServerConfig | None) -> int:
    """The max bs whose captured sizes cover `batch` (the size it is padded to)."""
    version = config.version if config else None
    memory = hardware.gpu_memory_gb(config)  # before 0.5.3 the list depends on the GPU
    sizes = captured_batch_sizes(version, 4096, gpu_memory_gb=memory) or (4096,)
    return round_up_to_captured(math.ceil(batch), sizes) or 4096
