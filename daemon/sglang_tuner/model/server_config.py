"""What a server runs with: the tuning knobs read from `/server_info`, and the workload
profiles a target may declare."""

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, get_args

Profile = Literal["offline", "online", "long_context", "multi_turn"]
PROFILES: tuple[str, ...] = get_args(Profile)
# SGLang's `--disaggregation-mode` (0.5.23 `arg_groups/fields/disagg.py`): "null" is a server
# that prefills and decodes; "prefill" / "decode" are the two roles of a PD-disaggregated pair.
DisaggregationMode = Literal["null", "prefill", "decode"]
DISAGGREGATION_MODES: tuple[str, ...] = get_args(DisaggregationMode)


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """The tuning knobs a server runs with, read from `/server_info` (secrets already redacted).

    `None` means the server did not say (older version, field absent, or CLI value unset).
    """

    version: str | None = None
    model_path: str | None = None
    # Flags as typed: what SGLang reports transformed under attention DP (0.3 x the
    # conservativeness, the chunked prefill size divided over the ranks, a rank's request cap)
    # is read back by model/flag_transforms.read_config, which the readers call.
    schedule_conservativeness: float | None = None
    mem_fraction_static: float | None = None
    chunked_prefill_size: int | None = None
    max_prefill_tokens: int | None = None
    max_running_requests: int | None = None  # the flag (typed, else the ranks' caps' reading)
    max_running_requests_per_dp: int | None = None  # effective per DP rank (>= v0.5.9)
    cuda_graph_max_bs: int | None = None  # resolved across the v0.5.14 rename
    disable_cuda_graph: bool | None = None
    tp_size: int | None = None
    dp_size: int | None = None
    pp_size: int | None = None
    enable_dp_attention: bool | None = None
    enable_metrics_for_all_schedulers: bool | None = None
    schedule_policy: str | None = None
    attention_backend: str | None = None  # resolved value (internal_states first)
    kv_cache_dtype: str | None = None
    quantization: str | None = None
    enable_torch_compile: bool | None = None
    disable_radix_cache: bool | None = None
    enable_hierarchical_cache: bool | None = None  # HiCache: evicted prefixes kept in host memory
    max_total_num_tokens: int | None = None
    context_length: int | None = None
    startup_available_gpu_mem_gb: float | None = None
    disaggregation_mode: str | None = None  # "null", "prefill" or "decode" (PD disaggregation)
    gpu_model: str | None = None  # from DCGM or the target's config, when known
    raw: Mapping[str, Any] = field(default_factory=dict)  # the redacted body, for /targets

    def attention_dp_size(self) -> int | None:
        """Schedulers sharing the TP group under DP attention (1 without); None if unknown.

        0.5.22+ reports `attn_dp_size` (and `dp_size` 1); before, `dp_size` with
        `enable_dp_attention`.
        """
        width = self.raw.get("attn_dp_size")
        if isinstance(width, int) and not isinstance(width, bool) and width >= 1:
            return width
        if self.enable_dp_attention is None:
            return None if (self.dp_size or 1) > 1 else 1
        return (self.dp_size or 1) if self.enable_dp_attention else 1


def merge_config(held: ServerConfig, newer: ServerConfig) -> ServerConfig:
    """`held` with every value `newer` states (a partial read, such as a log's launch line,
    over a full `/server_info`); the raw body is the newer one's."""
    stated = {f.name: getattr(newer, f.name) for f in fields(newer) if f.name != "raw"}
    return replace(held, **{k: v for k, v in stated.items() if v is not None}, raw=newer.raw)
