"""The decode batch sizes SGLang captures a CUDA graph for, and the size a batch is padded to.

A decode batch of `b` runs the smallest captured graph of at least `b` rows; the padding rows
cost like real ones (GEMM rows, and for a MoE model the experts they are routed to). The list
is SGLang's default since 0.5 (ServerArgs._generate_cuda_graph_batch_sizes in 0.5.9,
arg_groups/cuda_graph_hook.py in 0.5.23): 1, 2, 4, 8, 12, then steps of 8 to 256, of 16 to 512,
of 32 beyond, cut at --cuda-graph-max-bs (which 0.5.17+ appends when it is not in the list).
"""

from bisect import bisect_left
from collections.abc import Sequence

DEFAULT_CAPTURE_BASE: tuple[int, ...] = (1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 512, 16))


def default_capture_sizes(max_bs: int, append_max_bs: bool = True) -> list[int]:
    """SGLang's default capture list up to `max_bs`."""
    base = [*DEFAULT_CAPTURE_BASE, *range(512, max_bs + 1, 32)]
    sizes = [b for b in base if b <= max_bs]
    if append_max_bs and max_bs not in sizes:
        sizes.append(max_bs)
    return sizes


def prefill_graph_sizes(max_tokens: int) -> int:
    """How many token counts SGLang's prefill (piecewise) CUDA graphs capture up to
    `max_tokens`; its --mem-fraction-static formula reserves 8 MiB for each (0.5.8+; the graphs
    are on by default from 0.5.10)."""
    grid = [*range(4, 33, 4), *range(48, 257, 16), *range(288, 513, 32), *range(576, 1025, 64),
            *range(1280, 4097, 256), *range(4608, max_tokens + 1, 512)]  # fmt: skip
    return sum(1 for size in grid if size <= max_tokens)


def padded_rows(batch: int, sizes: Sequence[int]) -> int:
    """The captured size `batch` is padded to, or 0 when it is above every size (eager)."""
    i = bisect_left(sizes, batch)
    return sizes[i] if i < len(sizes) else 0
