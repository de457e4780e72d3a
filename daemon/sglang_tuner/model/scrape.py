"""What one read of a server ends as: a `Snapshot` of its canonical signals, the closed sets of
failure reasons (a scrape's, a Prometheus query's), the limits a scrape holds a page to, the
`ScrapeResult`, and a Prometheus query's `QueryStatus`. Immutable.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One scrape of one target as canonical signals (`model/signals.py`); absent = not exposed."""

    target: str
    ts: float
    values: Mapping[str, float]


# Closed set of scrape failure reasons (label values of sglang_tuner_scrape_failures_total).
SCRAPE_FAILURE_REASONS: tuple[str, ...] = (
    "timeout",
    "conn_refused",
    "connect_error",
    # 404 on /metrics while the server's /health or /server_info answers: SGLang without
    # --enable-metrics; a 404 where no SGLang endpoint answers is a wrong URL (`http_404`)
    "http_404_metrics_disabled",
    "http_404",
    "http_4xx",
    "http_5xx",
    "body_too_large",
    "parse",
    "no_sglang_metrics",  # a page without any sample (a just-started SGLang)
    # a page of samples, none SGLang's: another exporter (`not_sglang`), or sglang-tuner's own
    # /metrics (`own_exporter`)
    "not_sglang",
    "own_exporter",
    # the page broke one of the target's scrape limits (`ScrapeLimits`)
    "sample_limit_exceeded",
    "label_limit_exceeded",
    "label_value_length_limit_exceeded",
    # a Model Gateway's page listed too many workers, or a worker URL too long to be one
    "worker_limit_exceeded",
    # read through a Prometheus-compatible API (a whole round, or this target's series)
    "query_failed",
    "query_timeout",
    "no_series",
)
# Failures that say no server listens there (refused, unresolvable, unreachable): the target is
# gone rather than slow or broken.
UNREACHABLE_REASONS: frozenset[str] = frozenset(("conn_refused", "connect_error"))
# Failures that say the target URL does not lead to an SGLang server's /metrics at all (a wrong
# path, another exporter, sglang-tuner itself): nothing read there is SGLang's, so no advice.
NOT_SGLANG_REASONS: frozenset[str] = frozenset(("http_404", "not_sglang", "own_exporter"))
# Closed set of reasons a Prometheus query failed (sglang_tuner_prometheus_query_failures_total).
QUERY_FAILURE_REASONS: tuple[str, ...] = (
    "timeout",
    "unreachable",
    "rejected",  # 4xx: bad query, auth, too many requests, or an execution error
    "server_error",  # 5xx other than a timeout
    "bad_response",  # not a Prometheus API answer, or not the result type asked for
    "too_large",  # an answer over `max_answer_bytes`
)


@dataclass(frozen=True, slots=True)
class ScrapeLimits:
    """Prometheus's per-scrape limits: a page past one fails the scrape. 0 = no limit."""

    sample_limit: int = 50_000  # sample lines in a page (SGLang writes about 800)
    label_limit: int = 0  # labels of one series (its name not counted)
    label_value_length_limit: int = 2048  # bytes of one label value


@dataclass(frozen=True, slots=True)
class ScrapeResult:
    """Outcome of one `/metrics` scrape: a snapshot, or a failure reason from a closed set."""

    target: str
    ts: float
    duration_seconds: float
    snapshot: Snapshot | None = None
    error_reason: str | None = None  # one of SCRAPE_FAILURE_REASONS
    error: str | None = None  # one human-readable line
    sglang_version: str | None = None
    duplicate_samples: int = 0  # samples the page repeated (the first of each series is read)
    # quantile signal -> the histogram bucket bounds it was read from (None: not known)
    resolution: Mapping[str, tuple[float, ...]] | None = None

    @property
    def is_up(self) -> bool:
        """True when the scrape produced a snapshot."""
        return self.snapshot is not None


@dataclass(frozen=True, slots=True)
class QueryStatus:
    """One query of the Prometheus source: its latest run and its counts since start."""

    name: str  # stable short name, the `query` label (the canonical signal it answers)
    expr: str
    ts: float | None = None  # when it last ran
    duration_seconds: float | None = None
    series: int = 0  # series in the latest answer
    error_reason: str | None = None  # one of QUERY_FAILURE_REASONS, latest run
    error: str | None = None
    warnings: tuple[str, ...] = ()  # latest answer's warnings (e.g. a partial response)
    runs_total: int = 0
    failures_total: Mapping[str, int] = field(default_factory=dict)
    warnings_total: int = 0  # answers that carried warnings
