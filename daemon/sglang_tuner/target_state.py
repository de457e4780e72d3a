"""Target state: what the daemon keeps about one SGLang server between scrapes. Pure, no I/O.

The loop reads the sources and hands their results here: `ingest` for each scrape (with what the
log said since the previous one), `apply_server_info` and `apply_dcgm` when those were read.
"""

import dataclasses
import math
from collections import Counter
from collections.abc import Mapping

from sglang_tuner.changes.record import FLAGS, Change, ChangeLog
from sglang_tuner.model.crash_report import CrashReport
from sglang_tuner.model.flags import CRASH_BLAME, RECONFIGURING_FIELDS, FlagHistory, FlagOutcome
from sglang_tuner.model.scrape import UNREACHABLE_REASONS, ScrapeResult, Snapshot
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.model.signals import (
    CRASH_EVENT_SIGNALS,
    GPU_FB_FREE_GB,
    NUM_QUEUE_REQS,
    NUM_RUNNING_REQS,
    RESTARTS,
    TOKEN_USAGE,
)
from sglang_tuner.model.target_spec import TargetSpec
from sglang_tuner.model.window import Window

# The load a log gives (its batch lines): with it, a server whose /metrics is off is judged from
# its log alone, a first-class target.
LOG_LOAD_SIGNALS = (NUM_RUNNING_REQS, NUM_QUEUE_REQS, TOKEN_USAGE)
METRICS_OFF_REASON = "http_404_metrics_disabled"
# Where a signal of the window came from, for /targets: metrics win, the log fills the gaps
# (crashes, retractions where no counter exists, the CUDA-graph flag of each decode line), and
# stands in for the metrics where they are off; DCGM gives the free GPU memory.
METRICS, LOG, DCGM = "metrics", "log", "dcgm"

# The latest crashes kept in words (the rules read those in their window).
CRASH_REPORTS_KEPT = 16
# A configuration that served this long without a crash has safe flag values (one window).
SAFE_AFTER_SECONDS = 300.0


class TargetState:
    """One SGLang server: its window, its flags, and the record of its scrapes."""

    def __init__(
        self,
        spec: TargetSpec,
        window_capacity: int,
        *,
        window_seconds: float = 300.0,
        warmup_seconds: float = 60.0,
        min_samples: int = 6,
        verifies: Mapping[str, tuple[str, ...]] | None = None,
    ) -> None:
        self.spec = spec
        self.window = Window(window_capacity)
        profile = spec.profile or "offline"  # verdicts of an inferred profile: offline's metrics
        self.changes = ChangeLog(spec.name, profile, window_seconds, warmup_seconds, verifies)
        self.min_samples = min_samples
        self.restart_pending = False  # a restart was seen since the last /server_info read
        self.config: ServerConfig | None = None
        self.config_error: str | None = None
        self.gpu_fb_free_gb: float | None = None
        self.dcgm_gpu_model: str | None = None
        self.last: ScrapeResult | None = None
        self.last_success_ts: float | None = None
        self.scrapes_total = 0
        self.failures: Counter[str] = Counter()
        self.duplicate_samples_total = 0
        self.needs_server_info = True  # at start and after a restart
        self.server_info_failures = 0  # failed /server_info reads in a row
        self.unreachable_since: float | None = None  # first of the refused scrapes in a row
        self.history = FlagHistory()  # the last safe and last failing value of each flag
        self.up_since: float | None = None  # first good scrape since the last restart
        self.log_serves = False  # /metrics is off and the log gives the load instead
        self.latest_values: Mapping[str, float] = {}  # the latest sample, every source merged
        self.signal_sources: dict[str, str] = {}  # signal -> where its latest value came from
        self.crash_reports: tuple[CrashReport, ...] = ()  # the log's latest crashes, in words
        # quantile signal -> the histogram bounds it is read from: what a verdict can tell apart
        self.resolution: Mapping[str, tuple[float, ...]] = {}

    def resize_window(self, capacity: int) -> None:
        """Keep the newest samples in a window of `capacity` (the scrape interval changed)."""
        if capacity != self.window.capacity:
            self.window = self.window.resized(capacity)

    @property
    def name(self) -> str:
        """The `target` label value."""
        return self.spec.name

    def ingest(self, result: ScrapeResult, log_values: Mapping[str, float] | None = None) -> None:
        """One scrape's outcome, with the log's signals since the previous scrape."""
        result = _finite(result)
        self.scrapes_total += 1
        self.duplicate_samples_total += result.duplicate_samples
        if result.is_up and self.last is not None and not self.last.is_up:
            self.server_info_failures = 0  # answering again: ask /server_info at once
        if result.error_reason not in UNREACHABLE_REASONS:
            self.unreachable_since = None
        elif self.unreachable_since is None:
            self.unreachable_since = result.ts
        log_values = log_values or {}
        result = self._served_by_log(result, log_values)
        self.last = result
        crashed = any(log_values.get(signal, 0) > 0 for signal in CRASH_EVENT_SIGNALS)
        if crashed:
            self._remember_crash(log_values, result.ts)
        if result.snapshot is None:
            self.failures[result.error_reason or "unknown"] += 1
            self.up_since = None
            # While down, crash lines still count: a crash loop is exactly when they matter.
            if crashed:
                self.window.append(Snapshot(self.name, result.ts, dict(log_values)))
            return
        self.last_success_ts = result.ts
        values = {**log_values, **result.snapshot.values}  # metrics win; the log fills gaps
        if self.gpu_fb_free_gb is not None:
            values[GPU_FB_FREE_GB] = self.gpu_fb_free_gb
        self._note_sources(result.snapshot.values, log_values)
        restarted = values.get(RESTARTS, 0) > 0
        if restarted:
            self.needs_server_info = True
        self.restart_pending = self.restart_pending or restarted  # counters reset: a new process
        if self.up_since is None or restarted or crashed:
            self.up_since = result.ts
        self._remember_safe(result.ts)
        self.window.append(Snapshot(self.name, result.ts, values))
        self.latest_values = values
        if result.resolution:
            self.resolution = result.resolution
        self.changes.verify(self.window, result.ts, self.min_samples, self.resolution)

    def note_crashes(self, reports: tuple[CrashReport, ...]) -> None:
        """The crashes the log read since the previous scrape, said in words (its signals count
        them): the newest `CRASH_REPORTS_KEPT` are kept for the rules."""
        if reports:
            self.crash_reports = (*self.crash_reports, *reports)[-CRASH_REPORTS_KEPT:]

    def _served_by_log(self, result: ScrapeResult, log_values: Mapping[str, float]) -> ScrapeResult:
        """A scrape refused because metrics are off, while the log gives the load: the log's
        sample stands in for the page (the failure reason is kept, for `metrics_disabled`)."""
        if result.snapshot is not None or result.error_reason != METRICS_OFF_REASON:
            return result
        self.log_serves = self.log_serves or any(s in log_values for s in LOG_LOAD_SIGNALS)
        if not self.log_serves:
            return result
        return dataclasses.replace(result, snapshot=Snapshot(self.name, result.ts, {}))

    def _note_sources(self, metrics: Mapping[str, float], log: Mapping[str, float]) -> None:
        """Where each signal of this sample came from."""
        sources = self.signal_sources
        for signal in log.keys() - metrics.keys():
            sources[signal] = LOG
        for signal in metrics:
            sources[signal] = METRICS
        if self.gpu_fb_free_gb is not None:
            sources[GPU_FB_FREE_GB] = DCGM

    def _remember_crash(self, values: Mapping[str, float], ts: float) -> None:
        """The flag values the server just crashed with are failing values from now on."""
        if self.config is None:
            return
        failing, failing_low = dict(self.history.failing), dict(self.history.failing_low)
        for signal, blamed in CRASH_BLAME.items():
            if values.get(signal, 0) <= 0:
                continue
            for field, too_low in blamed:
                value = getattr(self.config, field)
                if value is not None:
                    side = failing_low if too_low else failing
                    side[field] = FlagOutcome(value, ts, signal, too_low)
        self.history = dataclasses.replace(self.history, failing=failing, failing_low=failing_low)

    def _remember_safe(self, ts: float) -> None:
        """Flag values that served `SAFE_AFTER_SECONDS` without a crash are safe values."""
        up_since, config = self.up_since, self.config
        if config is None or up_since is None or ts - up_since < SAFE_AFTER_SECONDS:
            return
        safe = dict(self.history.safe)
        for field in RECONFIGURING_FIELDS:
            value = getattr(config, field)
            if value is not None and (field not in safe or safe[field].value != value):
                safe[field] = FlagOutcome(value, ts)
        if safe != self.history.safe:
            self.history = dataclasses.replace(self.history, safe=safe)

    def apply_server_info(
        self,
        config: ServerConfig | None,
        error: str | None,
        asked: Mapping[str, tuple[str, str]] | None = None,
        asked_ratio: Mapping[str, float] | None = None,
        asked_stated: Mapping[str, tuple[str, ...]] | None = None,
    ) -> Change | None:
        """A `/server_info` read. After a restart it records a change (`asked`: flag -> (value,
        rule) the advice suggested, `asked_stated` the costs each rule's advice stated); new
        tuning flags start the window afresh at the restart."""
        gpu_model = self.dcgm_gpu_model or self.spec.gpu_model  # /server_info never says
        if config is not None and gpu_model and not config.gpu_model:
            config = dataclasses.replace(config, gpu_model=gpu_model)
        change = None
        old, restarted_at = self.config, self.up_since
        down = self.last is not None and not self.last.is_up
        if config is not None and down and flags_changed(old, config):
            # New flags while /metrics is still down (restarting): take them once it answers,
            # so the change is recorded from its first good scrape, not silently applied.
            self.needs_server_info = True
            return None
        if config is not None and old is not None and restarted_at is not None:
            if self.restart_pending or flags_changed(old, config):
                change = self.changes.record(
                    old, config, self.window, restarted_at, asked, asked_ratio, asked_stated
                )
                if change.kind == FLAGS:
                    # the new process's first scrape goes too: its rates were taken against
                    # the old process's counters (a server already busy before it took this
                    # address shows its whole count as one interval's increase)
                    self.window.keep_since(math.nextafter(restarted_at, math.inf))
                    # the old flags' crashes go with their samples: said in words without
                    # their counts, a crash the change answered read as one no rule knows
                    self.crash_reports = tuple(r for r in self.crash_reports if r.ts > restarted_at)
        if config is not None:
            self.restart_pending = False
        self.server_info_failures = 0 if config is not None else self.server_info_failures + 1
        self.needs_server_info = config is None
        self.config = config or self.config
        self.config_error = error
        return change

    def apply_dcgm(self, facts: Mapping[str, float | str]) -> None:
        """A DCGM exporter read: free framebuffer memory and the GPU model."""
        free = facts.get(GPU_FB_FREE_GB)
        self.gpu_fb_free_gb = float(free) if isinstance(free, int | float) else None
        model = facts.get("gpu_model")
        self.dcgm_gpu_model = model if isinstance(model, str) else self.dcgm_gpu_model


def _finite(result: ScrapeResult) -> ScrapeResult:
    """The result without NaN and infinite values: a page's NaN or ±Inf gauge is no evidence a
    rule can weigh ("p50 inf"), and the window reads a missing value as NaN already."""
    snapshot = result.snapshot
    if snapshot is None or all(map(math.isfinite, snapshot.values.values())):
        return result
    values = {k: v for k, v in snapshot.values.items() if math.isfinite(v)}
    return dataclasses.replace(result, snapshot=dataclasses.replace(snapshot, values=values))


def flags_changed(old: ServerConfig | None, new: ServerConfig) -> bool:
    """True when any tuning flag differs between two reads of the same server."""
    if old is None:
        return False
    return any(getattr(old, f) != getattr(new, f) for f in RECONFIGURING_FIELDS)
