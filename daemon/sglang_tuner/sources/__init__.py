"""What the sources hand to the rest of the daemon: snapshots, server config, scrape outcomes."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One scrape of one target as canonical signals (`signals.py`); absent = not exposed."""

    target: str
    ts: float
    values: Mapping[str, float]


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """The tuning knobs a server runs with, read from `/server_info` (secrets already redacted).

    `None` means the server did not say (older version, field absent, or CLI value unset).
    """

    version: str | None = None
    model_path: str | None = None
    schedule_conservativeness: float | None = None
    mem_fraction_static: float | None = None
    chunked_prefill_size: int | None = None
    max_prefill_tokens: int | None = None
    max_running_requests: int | None = None  # effective value where the server reports it
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
    max_total_num_tokens: int | None = None
    context_length: int | None = None
    startup_available_gpu_mem_gb: float | None = None
    gpu_model: str | None = None  # from DCGM or the target's config, when known
    raw: Mapping[str, Any] = field(default_factory=dict)  # the redacted body, for /targets


@dataclass(frozen=True, slots=True)
class ScrapeResult:
    """Outcome of one `/metrics` scrape: a snapshot, or a failure reason from a closed set."""

    target: str
    ts: float
    duration_seconds: float
    snapshot: Snapshot | None = None
    error_reason: str | None = None  # e.g. timeout, conn_refused, http_404_metrics_disabled
    error: str | None = None  # one human-readable line
    sglang_version: str | None = None

    @property
    def is_up(self) -> bool:
        """True when the scrape produced a snapshot."""
        return self.snapshot is not None


# Closed set of scrape failure reasons (label values of sglang_tuner_scrape_failures_total).
SCRAPE_FAILURE_REASONS: tuple[str, ...] = (
    "timeout",
    "conn_refused",
    "connect_error",
    "http_404_metrics_disabled",
    "http_4xx",
    "http_5xx",
    "body_too_large",
    "parse",
    "no_sglang_metrics",
)
