"""SGLang's own `--mem-fraction-static` when the flag is unset, re-derived from its formula.

0.5.3+ (`ServerArgs._handle_gpu_memory_settings`, `arg_groups/memory_hook.py` from 0.5.19):
`round((gpu - reserved) / gpu, 3)` with, in MiB, reserved = 512 + max(chunked prefill, 2048)
x 1.5 + graph max bs x 2 + tp x pp / 8 x 1024 (+ DP-attention and prefill-graph terms),
at least 10 GiB on GPUs above 60 GB. 0.4.8 - 0.5.2: a reserve per GPU-memory tier.
0.4.6: a table by tp size. The estimate is within about 0.005 of SGLang's (GPU memory comes
from the card's name, not torch) and assumes a text-only model (VLMs get a further cut).
"""

from collections.abc import Mapping
from typing import Any

from sglang_physics import GPUS, prefill_graph_sizes

from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.rules.sglang.versions import in_span

GIB = 1024.0  # MiB
# 0.4.8 - 0.5.2 `ServerArgs.__post_init__`: (below GB, reserve GiB at parallel size 0, per unit).
_TIER_RESERVE: tuple[tuple[float, float, float], ...] = (
    (35, 2.8, 0.1), (90, 9.5, 0.5), (160, 12, 0.5), (float("inf"), 32, 0.0),
)  # fmt: skip
# 0.4.6: fraction by tp size on GPUs up to 80 GB; (gpu - 13 GiB) / gpu above.
_BY_TP_046: tuple[tuple[int, float], ...] = ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87), (1, 0.88))
# 0.5.3+ reserve terms, MiB: constant metadata, activations per token of the larger of the
# chunked prefill size and MIN_ACTIVATION_TOKENS, communication buffers per tp x pp rank.
RESERVE_BASE_MIB = 512.0
RESERVE_MIB_PER_ACTIVATION_TOKEN = 1.5
MIN_ACTIVATION_TOKENS = 2048
RESERVE_MIB_PER_RANK = 128.0
PREFILL_GRAPH_RESERVE_SINCE = "0.5.8"  # piecewise graphs reserve len(tokens) x 8 MiB
PREFILL_GRAPH_DEFAULT_ON = "0.5.10"  # on by default; MLA models reserve 1.5 GiB instead


def _unmodelled(config: ServerConfig) -> bool:
    """Launch options whose extra reserve the estimate leaves out."""
    raw = config.raw
    return bool(
        raw.get("speculative_algorithm")
        or raw.get("disaggregation_mode") not in (None, "null")
        or raw.get("moe_a2a_backend") == "deepep"
        or (raw.get("enable_piecewise_cuda_graph") and in_span(config.version, "0.5.6", "0.5.8"))
    )


def _prefill_graphs_on(config: ServerConfig, width: int) -> bool:
    """Whether prefill graphs are captured: as reported, else SGLang's main auto-disables."""
    raw: Mapping[str, Any] = config.raw
    if not in_span(config.version, PREFILL_GRAPH_DEFAULT_ON):
        return raw.get("enable_piecewise_cuda_graph") is True
    disabled = raw.get("disable_piecewise_cuda_graph")
    if isinstance(disabled, bool):
        return not disabled
    graphs = raw.get("cuda_graph_config")
    prefill = graphs.get("prefill") if isinstance(graphs, Mapping) else None
    backend = prefill.get("backend") if isinstance(prefill, Mapping) else None
    if isinstance(backend, str):
        return backend != "disabled"
    return width == 1 and not config.enable_torch_compile and (config.pp_size or 1) == 1


def _reserved_mib(config: ServerConfig, gpu_memory_gb: float, mla: bool) -> float | None:
    """0.5.3+ reserve in MiB; None without the reported chunked prefill size or graph max bs."""
    width = config.attention_dp_size() or 1
    chunked, max_bs = config.chunked_prefill_size, config.cuda_graph_max_bs
    if chunked is None or max_bs is None:
        return None
    chunked *= width  # reported after the DP-attention split; the formula ran before it
    tokens = chunked if chunked > 0 else (config.max_prefill_tokens or 16384)
    activations = max(tokens, MIN_ACTIVATION_TOKENS) * RESERVE_MIB_PER_ACTIVATION_TOKEN
    ranks = (config.tp_size or 1) * (config.pp_size or 1)
    reserved = RESERVE_BASE_MIB + activations + ranks * RESERVE_MIB_PER_RANK
    if not (config.disable_cuda_graph and in_span(config.version, "0.5.15")):
        reserved += max_bs * 2
    if width > 1:
        reserved += max_bs * width * (4.5 if max_bs > 300 else 3)
    if in_span(config.version, PREFILL_GRAPH_RESERVE_SINCE) and _prefill_graphs_on(config, width):
        on_by_default = in_span(config.version, PREFILL_GRAPH_DEFAULT_ON)
        if mla and on_by_default:
            reserved += 1.5 * GIB
        else:
            reserved += prefill_graph_sizes(2048 if mla else tokens) * 8
    return max(reserved, 10 * GIB) if gpu_memory_gb > 60 else reserved


def _tier_fraction(config: ServerConfig, gpu_memory_gb: float) -> float:
    """0.4.8 - 0.5.2: reserve by GPU-memory tier and tp x pp (+4 GiB with DP attention)."""
    parallel = (config.tp_size or 1) * (config.pp_size or 1)
    base, per_unit = next((b, p) for below, b, p in _TIER_RESERVE if gpu_memory_gb < below)
    reserve = base + parallel * per_unit + (4 if (config.attention_dp_size() or 1) > 1 else 0)
    return round((gpu_memory_gb - reserve) / gpu_memory_gb, 3)


def _fraction_046(tp_size: int, gpu_memory_gb: float) -> float:
    """0.4.6: the tp table up to 80 GB, (gpu - 13 GiB) / gpu above."""
    if gpu_memory_gb > 80:
        return (gpu_memory_gb - 13) / gpu_memory_gb
    return next(fraction for least, fraction in _BY_TP_046 if tp_size >= least)


def reported_gib(gpu_model: str | None, gpu_memory_gb: float) -> float:
    """The GPU's memory as SGLang reads it (torch's total, in GiB: an L40S sold as 48 GB reports
    44.39 GiB), which its defaults key on, for the cards the physics knows by their reported
    name; else the card's stated size."""
    for gpu in GPUS.values():
        if gpu_model == gpu.name:
            return gpu.memory_gib
    return gpu_memory_gb


def estimate_mem_fraction_static(
    config: ServerConfig, gpu_memory_gb: float | None, *, mla: bool = False
) -> float | None:
    """SGLang's `--mem-fraction-static` for this launch had the flag been left out.

    `mla`: the model uses MLA attention (`backends.is_mla_or_nsa`). None when the GPU is
    unknown, for 0.4.7 (a one-release formula) and for speculative decoding, PD
    disaggregation and DeepEP, whose reserves are not modelled.
    """
    version = config.version
    if gpu_memory_gb is None or _unmodelled(config):
        return None
    gpu_memory_gb = reported_gib(config.gpu_model, gpu_memory_gb)
    if in_span(version, "0.5.3"):
        reserved = _reserved_mib(config, gpu_memory_gb, mla)
        total = gpu_memory_gb * GIB
        return None if reserved is None else round((total - reserved) / total, 3)
    if in_span(version, "0.4.8"):
        return _tier_fraction(config, gpu_memory_gb)
    if in_span(version, "0.4.7"):
        return None
    return _fraction_046(config.tp_size or 1, gpu_memory_gb)
