"""API response models for the watched servers and the tuning-rule catalogue."""

import math
from typing import Any

from pydantic import BaseModel, Field

from sglang_tuner.api.schemas.advice_response import FromAttributes, api_path, rfc3339
from sglang_tuner.config.settings import RuleSettings, Settings
from sglang_tuner.evaluation import RuleResult, TargetStatus
from sglang_tuner.model.advice import Severity
from sglang_tuner.model.scrape import QueryStatus
from sglang_tuner.rule import Rule


class ServerArgsOut(FromAttributes):
    """The tuning-relevant flags the server runs with (None: the server did not say)."""

    schedule_conservativeness: float | None = None
    mem_fraction_static: float | None = None
    chunked_prefill_size: int | None = None
    max_running_requests: int | None = None
    cuda_graph_max_bs: int | None = None
    tp_size: int | None = None
    dp_size: int | None = None
    schedule_policy: str | None = None
    attention_backend: str | None = None
    kv_cache_dtype: str | None = None
    quantization: str | None = None


class TargetOut(BaseModel):
    """What the daemon knows about one SGLang server."""

    name: str
    url: str
    profile: str
    profile_inferred: str | None = Field(
        None, description="Why, when the profile was inferred from the traffic (not configured)"
    )
    labels: dict[str, str]
    up: bool | None = Field(description="None until the first scrape ends")
    last_scrape: str | None
    last_scrape_ts: float | None
    last_scrape_age_seconds: float | None
    last_success: str | None
    last_success_ts: float | None
    scrape_duration_seconds: float | None
    error_reason: str | None = Field(description="e.g. timeout, http_404_metrics_disabled")
    error: str | None
    sglang_version: str | None
    server_args: ServerArgsOut | None
    config_error: str | None = Field(description="Why the server args are unknown, if they are")
    samples_in_window: int
    scrapes_total: int
    scrape_failures: dict[str, int]
    duplicate_samples_total: int = Field(
        description="Samples its pages repeated; the first of each series is read, as Prometheus"
    )
    advice_firing: int
    advice_pending: int
    health_score: float | None = Field(description="0-100, as sglang_tuner_health_score")
    signals: dict[str, float] = Field(description="Latest value of each canonical signal")
    signal_sources: dict[str, str] = Field(
        description="Where each signal's latest value came from: metrics, log or dcgm"
    )
    task_failures_total: int = Field(
        0,
        description="Exceptions in this target's own poll, log or config work (a bug or a "
        "hostile input, not a failed scrape); each is logged with the target's name",
    )
    task_error: str | None = Field(None, description="The last one, while it goes on failing")
    log_lines_dropped_total: int | None = Field(
        None,
        description="Lines of its log dropped unread: a piped log's 16 MiB buffer was full (the "
        "scrapes fell behind the writer); null without a log",
    )
    log_lines_cut_total: int | None = Field(
        None, description="Lines of its log longer than 32 KiB, cut there; null without a log"
    )
    links: dict[str, str]

    @classmethod
    def from_status(
        cls, t: TargetStatus, results: list[RuleResult], score: float | None, now: float
    ) -> "TargetOut":
        """The API view of one `TargetStatus`; `now` gives the age of the last scrape."""
        cfg = t.config
        return cls(
            **{k: getattr(t, k) for k in ("name", "url", "profile", "up", "error_reason")},
            profile_inferred=t.profile_inferred,
            labels=dict(t.labels),
            last_scrape=rfc3339(t.last_scrape_ts),
            last_scrape_ts=t.last_scrape_ts,
            last_scrape_age_seconds=None if t.last_scrape_ts is None else now - t.last_scrape_ts,
            last_success=rfc3339(t.last_success_ts),
            last_success_ts=t.last_success_ts,
            scrape_duration_seconds=t.scrape_duration_seconds,
            error=t.error,
            sglang_version=t.sglang_version or (cfg.version if cfg else None),
            server_args=None if cfg is None else ServerArgsOut.model_validate(cfg),
            config_error=t.config_error,
            samples_in_window=t.samples_in_window,
            scrapes_total=t.scrapes_total,
            scrape_failures=dict(t.failures_by_reason),
            duplicate_samples_total=t.duplicate_samples_total,
            advice_firing=sum(r.state == "firing" for r in results),
            advice_pending=sum(r.state == "pending" for r in results),
            health_score=score,
            signals={k: v for k, v in t.signals.items() if math.isfinite(v)},
            signal_sources=dict(t.signal_sources),
            task_failures_total=t.task_failures_total,
            task_error=t.task_error if t.task_failing else None,
            log_lines_dropped_total=t.log_lines_dropped_total,
            log_lines_cut_total=t.log_lines_cut_total,
            links={"advice": api_path("advice", t.name), "self": api_path("targets", t.name)},
        )


class QueryOut(BaseModel):
    """One query the Prometheus source sends every round, and how its last run went."""

    name: str = Field(description="The canonical signal (or input) it answers; label `query`")
    expr: str = Field(description="The PromQL sent, for a Prometheus admin to check its cost")
    up: bool | None = Field(description="Last run succeeded; None before the first run")
    last_run: str | None
    duration_seconds: float | None
    series: int
    error_reason: str | None = Field(description="timeout, unreachable, rejected, ...")
    error: str | None
    warnings: list[str] = Field(description="Of the last answer, e.g. a partial response")
    runs_total: int
    failures_total: dict[str, int]
    warnings_total: int

    @classmethod
    def from_status(cls, q: QueryStatus) -> "QueryOut":
        """The API view of one `QueryStatus`."""
        return cls(
            **{k: getattr(q, k) for k in ("name", "expr", "duration_seconds", "series", "error")},
            up=None if q.ts is None else q.error_reason is None,
            last_run=rfc3339(q.ts),
            error_reason=q.error_reason,
            warnings=list(q.warnings),
            runs_total=q.runs_total,
            failures_total=dict(q.failures_total),
            warnings_total=q.warnings_total,
        )


class TargetList(BaseModel):
    """Every watched SGLang server; in Prometheus mode also the queries that read them."""

    data: list[TargetOut]
    count: int
    shard: dict[str, int] = Field(description="This replica's shard: {index, count}")
    queries: list[QueryOut] = Field(description="The Prometheus source's queries (else empty)")


class EffectiveOut(BaseModel):
    """The values the rule runs with once `Settings` overrides are applied."""

    severity: Severity
    frequently_ratio: float
    window_seconds: float
    hold_for_seconds: float
    keep_firing_for_seconds: float
    thresholds: dict[str, dict[str, float]] = Field(description="Per profile")


class RuleOut(BaseModel):
    """One tuning rule of the catalogue, with its thresholds and the user's overrides."""

    id: str
    severity: Severity
    summary: str
    action: str
    source: str
    profiles: list[str]
    signals: list[str]
    thresholds: dict[str, float] = Field(description="Defaults, before profile and overrides")
    profile_thresholds: dict[str, dict[str, float]]
    legacy_thresholds: dict[str, float] = Field(
        description="The older guide's values, for targets with guide_version: legacy"
    )
    enabled: bool
    overrides: dict[str, Any] = Field(description="What the config file sets for this rule")
    effective: EffectiveOut

    @classmethod
    def from_rule(cls, rule: Rule, settings: Settings) -> "RuleOut":
        """The API view of one `Rule` under the given settings."""
        own = settings.rules.get(rule.id) or RuleSettings.model_validate({})
        return cls(
            **{k: getattr(rule, k) for k in ("id", "severity", "summary", "action", "source")},
            profiles=list(rule.profiles),
            signals=list(rule.signals),
            thresholds=dict(rule.thresholds),
            profile_thresholds={p: dict(th) for p, th in rule.profile_thresholds.items()},
            legacy_thresholds=dict(rule.legacy_thresholds),
            enabled=own.enabled,
            overrides=own.model_dump(exclude_unset=True),
            effective=EffectiveOut(
                severity=Severity(own.severity or rule.severity),
                frequently_ratio=own.frequently_ratio or settings.frequently_ratio,
                window_seconds=own.window_seconds or settings.window_seconds,
                hold_for_seconds=_first(own.hold_for_seconds, settings.hold_for_seconds),
                keep_firing_for_seconds=_first(
                    own.keep_firing_for_seconds, settings.keep_firing_for_seconds
                ),
                thresholds={p: rule.thresholds_for(p, own.thresholds) for p in rule.profiles},
            ),
        )


def _first(value: float | None, default: float) -> float:
    """`value` unless unset; 0 is a real setting for hold times."""
    return default if value is None else value


class RuleList(BaseModel):
    """The tuning-rule catalogue."""

    data: list[RuleOut]
    count: int
