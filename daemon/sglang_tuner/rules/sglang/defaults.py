"""What SGLang picks when a flag is not set, per version, GPU memory and tp size.

GPU memory is the card's size in GB as its name states it (80 for an H100). SGLang compares
torch's total memory in MiB against thresholds such as `90 * 1024`; a card's stated GB x 1024
falls on the same side of every threshold below as the MiB torch reports for it.
"""

import math
from dataclasses import dataclass

from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.rules.sglang.backends import is_mla_or_nsa
from sglang_tuner.rules.sglang.mem_fraction import estimate_mem_fraction_static
from sglang_tuner.rules.sglang.versions import as_of, in_span

DefaultValue = int | float | str | bool


@dataclass(frozen=True, slots=True)
class Tier:
    """Defaults for GPUs with less than `below_gb` of memory."""

    below_gb: float
    chunked_prefill_size: int
    graph_max_bs: tuple[int, int] | None  # (tp < 4, tp >= 4); None: from the capture list


# `ServerArgs.__post_init__` (<= 0.5.2), `_handle_gpu_memory_settings` (0.5.3 - 0.5.18),
# `arg_groups/memory_hook.handle_gpu_memory_settings` (0.5.19+). Oldest first.
_TIERS: tuple[tuple[str, tuple[Tier, ...]], ...] = (
    # 0.4.6 (older releases not modelled): 2048 / graph 8 or 80 below 25,000 MiB, else 8192.
    ("0.0.0", (Tier(25_000 / 1024, 2048, (8, 80)), Tier(math.inf, 8192, None))),
    # 0.4.7: 16384 above 180,000 MiB (B200, MI300).
    ("0.4.7", (Tier(25_000 / 1024, 2048, (8, 80)), Tier(180_000 / 1024, 8192, None),
               Tier(math.inf, 16384, None))),
    # 0.4.8: tiers at 35 and 160 GiB.
    ("0.4.8", (Tier(35, 2048, (8, 80)), Tier(160, 8192, None), Tier(math.inf, 16384, None))),
    # 0.5.3: a graph max bs for every tier; 4096 for 35-60 GB (A100 40GB, L40).
    ("0.5.3", (Tier(20, 2048, (8, 8)), Tier(35, 2048, (16, 80)), Tier(60, 4096, (32, 160)),
               Tier(160, 8192, (256, 512)), Tier(math.inf, 16384, (512, 512)))),
    # 0.5.4.post1: 24 (tp < 4) below 35 GB.
    ("0.5.4.post1", (Tier(20, 2048, (8, 8)), Tier(35, 2048, (24, 80)), Tier(60, 4096, (32, 160)),
                     Tier(160, 8192, (256, 512)), Tier(math.inf, 16384, (512, 512)))),
    # 0.5.20: 4096 and 48 / 160 below 35 GB (RTX 5090).
    ("0.5.20", (Tier(20, 2048, (8, 8)), Tier(35, 4096, (48, 160)), Tier(60, 4096, (32, 160)),
                Tier(160, 8192, (256, 512)), Tier(math.inf, 16384, (512, 512)))),
)  # fmt: skip
# 0.4.7 only: a PD-disaggregated server (prefill or decode) between 25,000 and 180,000 MiB gets
# 16384, not 8192 (`elif self.disaggregation_mode != "null"`); 0.4.8 dropped the branch.
PD_CHUNK_SPAN = ("0.4.7", "0.4.8")
PD_CHUNK = 16384
# The smallest and the largest `--chunked-prefill-size` SGLang picks itself, over every release.
SMALLEST_DEFAULT_CHUNK = min(t.chunked_prefill_size for _, tiers in _TIERS for t in tiers)
LARGEST_DEFAULT_CHUNK = max(t.chunked_prefill_size for _, tiers in _TIERS for t in tiers)
# Before 0.5.3 `cuda_graph_runner.get_batch_sizes_to_capture` built the list itself, up to 160
# and longer on big GPUs: (above GB, sizes added). 0.4.6 adds them only with dp_size 1.
RUNNER_BASE = (1, 2, 4, 8, *range(16, 161, 8))
_RUNNER_EXTRA: tuple[tuple[str, tuple[tuple[float, tuple[int, ...]], ...]], ...] = (
    ("0.0.0", ((80, tuple(range(160, 257, 8))),)),  # 0.4.6: > 81920 MiB
    ("0.4.7", ((96, tuple(range(160, 257, 8))), (180_000 / 1024, tuple(range(256, 513, 16))))),
    ("0.4.8", ((90, tuple(range(160, 257, 8))), (160_000 / 1024, tuple(range(256, 513, 16))))),
)  # fmt: skip
# 0.5.22+ `handle_gpu_memory_settings`: the default decode max bs is cut to a set
# `--max-running-requests`.
GRAPH_MAX_BS_CAPPED_BY_RUNNING = "0.5.22"
# `ServerArgs.schedule_policy`: "lpm" until 0.4.3.post2.
_SCHEDULE_POLICY = (("0.0.0", "lpm"), ("0.4.3.post3", "fcfs"))
# `SchedulePolicy._determine_active_policy` (every release): lpm (and hrrn, 0.5.20+) stop
# matching prefixes while more than 128 requests wait and serve them fcfs.
LPM_FALLBACK_QUEUE = 128
_QUEUE_SENSITIVE = ("lpm", "hrrn")
# `CacheAwarePolicy`: fcfs without the radix cache (`_validate_and_adjust_policy`).
CACHE_AWARE_POLICIES = ("lpm", "dfs-weight", "hrrn", "shortest-prefill-first")
# Request slots per DP rank: int(KV tokens / context length x 512) within [2048, 4096]
# (`ModelRunner.init_memory_pool`; `resolve_max_num_reqs` from 0.5.10). A set
# `--max-running-requests` per rank is cut to the slots from 0.5.10, to KV tokens // 2 from 0.5.14.
SLOTS_MIN, SLOTS_MAX = 2048, 4096
RUNNING_CUT_TO_SLOTS = "0.5.10"
RUNNING_CUT_TO_HALF_TOKENS = "0.5.14"
# SGLang rounds its estimate to 3 decimals; GPU memory from the card's name adds ~0.001-0.005.
MEM_FRACTION_TOLERANCE = 0.01
# Plain dataclass defaults, identical in every release checked (0.4.3 to 0.5.23).
FIXED_DEFAULTS: dict[str, DefaultValue] = {
    "--schedule-conservativeness": 1.0,
    "--torch-compile-max-bs": 32,
    "--kv-cache-dtype": "auto",
    "--max-prefill-tokens": 16384,
    "--enable-torch-compile": False,
    "--enable-metrics": False,
    "--enable-metrics-for-all-schedulers": False,
    "--disable-radix-cache": False,
}


def _tier(version: str | None, gpu_memory_gb: float) -> Tier:
    """The GPU-memory tier that applies."""
    return next(t for t in as_of(version, _TIERS) if gpu_memory_gb < t.below_gb)


def default_chunked_prefill_size(
    version: str | None,
    gpu_memory_gb: float | None,
    attention_dp: int = 1,
    *,
    pd_role: bool = False,
) -> int | None:
    """SGLang's `--chunked-prefill-size` when unset, as `/server_info` reports it.

    DP attention divides it by the attention-DP size (every release: `dp_size` with
    `--enable-dp-attention`, `attn_dp_size` from 0.5.22). `pd_role`: the server is a PD prefill
    or decode server (16384 on mid-size GPUs in 0.4.7). None when the GPU memory is unknown
    (SGLang then picks 4096, 0.4.8+; 8192 before).
    """
    if gpu_memory_gb is None:
        return None
    size = _tier(version, gpu_memory_gb).chunked_prefill_size
    if pd_role and size == 8192 and in_span(version, *PD_CHUNK_SPAN):
        size = PD_CHUNK
    return size // max(attention_dp, 1)


def default_graph_max_bs(
    version: str | None, gpu_memory_gb: float | None, tp_size: int | None
) -> int | None:
    """Largest decode batch SGLang captures in a CUDA graph when `--cuda-graph-max-bs` is unset.

    Before 0.5.3 SGLang set it only for small GPUs and `/server_info` reports null on the
    others; this is then the top of the runner's default list. None when the GPU is unknown.
    """
    if gpu_memory_gb is None:
        return None
    pair = _tier(version, gpu_memory_gb).graph_max_bs
    if pair is not None:
        return pair[0] if (tp_size or 1) < 4 else pair[1]
    return max(runner_default_sizes(version, gpu_memory_gb))


def runner_default_sizes(version: str | None, gpu_memory_gb: float) -> tuple[int, ...]:
    """The pre-0.5.3 default capture list for this GPU."""
    added = [sizes for above, sizes in as_of(version, _RUNNER_EXTRA) if gpu_memory_gb > above]
    return tuple(sorted(set(RUNNER_BASE).union(*added)))


def request_slots(max_total_num_tokens: int, context_len: int) -> int:
    """SGLang's request-slot count per DP rank when `--max-running-requests` is unset."""
    estimate = int(max_total_num_tokens / max(context_len, 1) * 512)
    return min(max(estimate, SLOTS_MIN), SLOTS_MAX)


def max_running_per_rank(config: ServerConfig, cli_value: int | None = None) -> int | None:
    """The running-request cap each DP rank gets for `--max-running-requests cli_value`.

    Unset (None): min(slots, KV tokens // 2), every release. Set: value // attention-DP size,
    cut as `RUNNING_CUT_*` say. Needs `max_total_num_tokens` and the model's context length in
    `context_length` (`/server_info` has it only when `--context-length` was given;
    `/v1/models` `max_model_len` always). Ignores the Mamba-state cap of hybrid models
    (sgl-project/sglang#38846).
    """
    tokens, context, width = (
        config.max_total_num_tokens,
        config.context_length,
        config.attention_dp_size(),
    )
    if tokens is None or context is None or width is None:
        return None
    slots = request_slots(tokens, context)
    if cli_value is None:
        return min(slots, tokens // 2)
    per_rank = max(cli_value // width, 1)
    if in_span(config.version, RUNNING_CUT_TO_HALF_TOKENS):
        return min(per_rank, tokens // 2)
    return min(per_rank, slots) if in_span(config.version, RUNNING_CUT_TO_SLOTS) else per_rank


def default_schedule_policy(version: str | None) -> str:
    """`--schedule-policy` default: fcfs since 0.4.3.post3, lpm before."""
    return as_of(version, _SCHEDULE_POLICY)


def policy_in_effect(policy: str, waiting: int, radix_cache_disabled: bool = False) -> str:
    """The policy the scheduler applies this step: cache-aware ones can fall back to fcfs."""
    if policy in CACHE_AWARE_POLICIES and radix_cache_disabled:
        return "fcfs"
    return "fcfs" if policy in _QUEUE_SENSITIVE and waiting > LPM_FALLBACK_QUEUE else policy


def _graph_default(config: ServerConfig, gpu_memory_gb: float | None) -> int | None:
    """Default decode graph max bs, cut to a set `--max-running-requests` from 0.5.22."""
    default = default_graph_max_bs(config.version, gpu_memory_gb, config.tp_size)
    running = config.raw.get("max_running_requests")
    if default is None or not isinstance(running, int) or isinstance(running, bool):
        return default
    capped = in_span(config.version, GRAPH_MAX_BS_CAPPED_BY_RUNNING)
    return min(default, running) if capped else default


def default_for(
    flag: str, config: ServerConfig, gpu_memory_gb: float | None
) -> DefaultValue | None:
    """SGLang's value for a flag the launch command left out, in flag units: the value that,
    typed, runs the same (what `ServerConfig` holds, `model/flag_transforms.read_config`).

    Either spelling of a renamed flag works. Under DP attention SGLang then divides the chunked
    prefill size and scales the conservativeness (`flag_transforms.write` says what it runs).
    None when it depends on what is unknown (GPU memory, an unmodelled launch option).
    """
    version = config.version
    setting = flag if flag != "--cuda-graph-max-bs-decode" else "--cuda-graph-max-bs"
    if setting == "--schedule-policy":
        return default_schedule_policy(version)
    if setting == "--chunked-prefill-size":
        pd_role = config.disaggregation_mode in ("prefill", "decode")
        return default_chunked_prefill_size(version, gpu_memory_gb, pd_role=pd_role)
    if setting == "--cuda-graph-max-bs":
        return _graph_default(config, gpu_memory_gb)
    if setting == "--mem-fraction-static":
        mla = is_mla_or_nsa(config.model_path)
        return estimate_mem_fraction_static(config, gpu_memory_gb, mla=mla)
    return FIXED_DEFAULTS.get(setting)


def is_default(
    flag: str, value: DefaultValue, config: ServerConfig, gpu_memory_gb: float | None
) -> bool | None:
    """Whether `value` is what SGLang uses for the flag when unset; None if unknown.

    `--mem-fraction-static` matches within `MEM_FRACTION_TOLERANCE` of the estimate.
    """
    default = default_for(flag, config, gpu_memory_gb)
    if default is None:
        return None
    if isinstance(default, bool) or isinstance(value, bool):
        return default is value
    if isinstance(default, float) and isinstance(value, int | float):
        tolerance = MEM_FRACTION_TOLERANCE if flag == "--mem-fraction-static" else 1e-9
        return abs(default - value) <= tolerance
    return default == value
