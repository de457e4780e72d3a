"""Target state: what the daemon keeps about one SGLang server between scrapes. Pure, no I/O.

The loop reads the sources and hands their results here: `ingest` for each scrape (with what the
log said since the previous one), `apply_server_info` and `apply_dcgm` when those were read.
"""

import dataclasses
from collections import Counter
from collections.abc import Mapping

from .signals import CRASH_EVENT_SIGNALS, GPU_FB_FREE_GB, RESTARTS
from .targets import TargetSpec
from .values import ScrapeResult, ServerConfig, Snapshot
from .window import Window

# Knobs whose change after a restart makes the old window describe another configuration.
TUNING_FIELDS = (
    "schedule_conservativeness",
    "mem_fraction_static",
    "chunked_prefill_size",
    "max_running_requests",
    "cuda_graph_max_bs",
    "tp_size",
    "dp_size",
    "schedule_policy",
    "attention_backend",
    "kv_cache_dtype",
    "quantization",
)


class TargetState:
    """One SGLang server: its window, its flags, and the record of its scrapes."""

    def __init__(self, spec: TargetSpec, window_capacity: int) -> None:
        self.spec = spec
        self.window = Window(window_capacity)
        self.config: ServerConfig | None = None
        self.config_error: str | None = None
        self.gpu_fb_free_gb: float | None = None
        self.dcgm_gpu_model: str | None = None
        self.last: ScrapeResult | None = None
        self.last_success_ts: float | None = None
        self.scrapes_total = 0
        self.failures: Counter[str] = Counter()
        self.needs_server_info = True  # at start and after a restart

    @property
    def name(self) -> str:
        """The `target` label value."""
        return self.spec.name

    def ingest(self, result: ScrapeResult, log_values: Mapping[str, float] | None = None) -> None:
        """One scrape's outcome, with the log's signals since the previous scrape."""
        self.scrapes_total += 1
        self.last = result
        log_values = log_values or {}
        if result.snapshot is None:
            self.failures[result.error_reason or "unknown"] += 1
            # While down, crash lines still count: a crash loop is exactly when they matter.
            if any(log_values.get(signal, 0) > 0 for signal in CRASH_EVENT_SIGNALS):
                self.window.append(Snapshot(self.name, result.ts, dict(log_values)))
            return
        self.last_success_ts = result.ts
        values = {**log_values, **result.snapshot.values}  # metrics win; the log fills gaps
        if self.gpu_fb_free_gb is not None:
            values[GPU_FB_FREE_GB] = self.gpu_fb_free_gb
        if values.get(RESTARTS, 0) > 0:
            self.needs_server_info = True
        self.window.append(Snapshot(self.name, result.ts, values))

    def apply_server_info(self, config: ServerConfig | None, error: str | None) -> bool:
        """A `/server_info` read; True when tuning flags changed (the window starts afresh)."""
        gpu_model = self.dcgm_gpu_model or self.spec.gpu_model  # /server_info never says
        if config is not None and gpu_model and not config.gpu_model:
            config = dataclasses.replace(config, gpu_model=gpu_model)
        changed = config is not None and flags_changed(self.config, config)
        if changed:
            self.window.clear()
        self.needs_server_info = config is None
        self.config = config or self.config
        self.config_error = error
        return changed

    def apply_dcgm(self, facts: Mapping[str, float | str]) -> None:
        """A DCGM exporter read: free framebuffer memory and the GPU model."""
        free = facts.get(GPU_FB_FREE_GB)
        self.gpu_fb_free_gb = float(free) if isinstance(free, int | float) else None
        model = facts.get("gpu_model")
        self.dcgm_gpu_model = model if isinstance(model, str) else self.dcgm_gpu_model


def flags_changed(old: ServerConfig | None, new: ServerConfig) -> bool:
    """True when any tuning flag differs between two reads of the same server."""
    if old is None:
        return False
    return any(getattr(old, f) != getattr(new, f) for f in TUNING_FIELDS)
