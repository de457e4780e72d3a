"""Per-target runtime: scrape, merge log/DCGM signals, keep the window and the target's status."""

import dataclasses
import logging
from collections import Counter

from .evaluate import RuleEvaluation
from .signals import DECODE_OOM_EVENTS, GPU_FB_FREE_GB, PREFILL_OOM_EVENTS, RESTARTS
from .sources import ScrapeResult, ServerConfig, Snapshot
from .sources.dcgm import fetch_dcgm
from .sources.http import HttpClient
from .sources.logs import LogFollower
from .sources.scrape import scrape_metrics
from .sources.server_info import fetch_server_info
from .sources.sglang import SignalMapper
from .state import TargetStatus
from .targets import TargetSpec
from .window import Window

logger = logging.getLogger(__name__)

# Knobs whose change after a restart makes the old window describe another configuration.
_TUNING_FIELDS = (
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


class TargetPoller:
    """Everything the daemon keeps about one SGLang server between scrapes."""

    def __init__(self, spec: TargetSpec, window_capacity: int) -> None:
        self.spec = spec
        self.window = Window(window_capacity)
        self.mapper = SignalMapper()
        self.client: HttpClient | None = None  # the target's own connection pool
        self.log = LogFollower(spec.log_file) if spec.log_file else None
        self.config: ServerConfig | None = None
        self.config_error: str | None = None
        self.gpu_fb_free_gb: float | None = None
        self.dcgm_gpu_model: str | None = None
        self.last: ScrapeResult | None = None
        self.last_success_ts: float | None = None
        self.scrapes_total = 0
        self.failures: Counter[str] = Counter()
        self.needs_server_info = True
        self.server_info_ts = 0.0  # when /server_info was last asked for
        self.evaluations: list[RuleEvaluation] = []  # the latest judgement of every rule
        self.evaluated_at: float | None = None
        self.evaluated_up: bool | None = None
        self.samples_in_window = 0

    async def scrape(self, client: HttpClient, now: float, timeout: float, cap: int) -> None:
        """One scrape; failures are recorded, never raised."""
        result = await scrape_metrics(
            client, self.spec.name, self.spec.url, self.mapper, now,
            timeout_seconds=timeout, max_body_bytes=cap,
        )  # fmt: skip
        self.scrapes_total += 1
        self._log_transition(result)
        self.last = result
        if result.snapshot is None:
            self.failures[result.error_reason or "unknown"] += 1
            self._keep_log_events(now)
            return
        self.last_success_ts = now
        values = dict(result.snapshot.values)
        if self.log is not None:
            values = self.log.poll(now) | values  # metrics win; the log fills what they lack
        if self.gpu_fb_free_gb is not None:
            values[GPU_FB_FREE_GB] = self.gpu_fb_free_gb
        if values.get(RESTARTS, 0) > 0:
            self.needs_server_info = True
        self.window.append(Snapshot(self.spec.name, now, values))

    def _keep_log_events(self, now: float) -> None:
        """While down, OOM lines still count: a crash loop is exactly when they matter."""
        if self.log is None:
            return
        events = self.log.poll(now)
        if events.get(PREFILL_OOM_EVENTS, 0) > 0 or events.get(DECODE_OOM_EVENTS, 0) > 0:
            self.window.append(Snapshot(self.spec.name, now, events))

    async def refresh_server_info(self, client: HttpClient, timeout: float) -> None:
        """Re-read `/server_info` (and DCGM); a restart with other flags starts a fresh window."""
        config, error = await fetch_server_info(
            client, self.spec.url, token=self.spec.token, timeout_seconds=timeout
        )
        if self.spec.dcgm_url:
            await self._refresh_dcgm(client, timeout)
        gpu_model = self.dcgm_gpu_model or self.spec.gpu_model  # /server_info never says
        if config is not None and gpu_model and not config.gpu_model:
            config = dataclasses.replace(config, gpu_model=gpu_model)
        if config is not None and _flags_changed(self.config, config):
            logger.info("target %s: tuning flags changed; starting a fresh window", self.spec.name)
            self.window.clear()
        self.needs_server_info = config is None
        self.config = config or self.config
        self.config_error = error

    async def _refresh_dcgm(self, client: HttpClient, timeout: float) -> None:
        assert self.spec.dcgm_url is not None
        facts = await fetch_dcgm(client, self.spec.dcgm_url, timeout_seconds=timeout)
        free = facts.get("gpu_fb_free_gb")
        self.gpu_fb_free_gb = float(free) if isinstance(free, int | float) else None
        model = facts.get("gpu_model")
        self.dcgm_gpu_model = model if isinstance(model, str) else self.dcgm_gpu_model

    def _log_transition(self, result: ScrapeResult) -> None:
        """One line per up/down change (and per new failure reason), never one per scrape."""
        before = self.last
        if result.is_up and (before is None or not before.is_up):
            logger.info("target %s is up (%s)", self.spec.name, self.spec.url)
        elif not result.is_up and (before is None or before.error_reason != result.error_reason):
            logger.warning("target %s is down: %s", self.spec.name, result.error)

    def is_due(self, now: float, interval_seconds: float) -> bool:
        """Judge again: never judged, the interval has passed, or the target went up or down."""
        if self.evaluated_at is None or now - self.evaluated_at >= interval_seconds:
            return True
        return self.last is not None and self.last.is_up != self.evaluated_up

    def status(self) -> TargetStatus:
        """The target's status for the published evaluation."""
        last = self.last
        signals = {}
        if last is not None and last.snapshot is not None:
            signals = dict(last.snapshot.values)
        return TargetStatus(
            name=self.spec.name,
            url=self.spec.url,
            profile=self.spec.profile,
            labels=dict(self.spec.labels),
            up=None if last is None else last.is_up,
            last_scrape_ts=None if last is None else last.ts,
            last_success_ts=self.last_success_ts,
            scrape_duration_seconds=None if last is None else last.duration_seconds,
            error_reason=None if last is None else last.error_reason,
            error=None if last is None else last.error,
            sglang_version=self.config.version if self.config else None,
            config=self.config,
            config_error=self.config_error,
            samples_in_window=self.samples_in_window,
            scrapes_total=self.scrapes_total,
            failures_by_reason=dict(self.failures),
            signals=signals,
        )


def _flags_changed(old: ServerConfig | None, new: ServerConfig) -> bool:
    if old is None:
        return False
    return any(getattr(old, f) != getattr(new, f) for f in _TUNING_FIELDS)
