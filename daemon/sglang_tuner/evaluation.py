"""The published evaluation: one immutable `Evaluation` that every output reads.

`publish.py` builds it from target state, judgements and alert state; the API, the exporter,
the Alertmanager path and the store read only this.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from sglang_tuner.alerting.alertmanager_status import AlertmanagerStatus
from sglang_tuner.changes.record import Change
from sglang_tuner.model.advice import Advice, AlertState, Health, Outcome, Severity
from sglang_tuner.model.next_change import Plan
from sglang_tuner.model.scrape import QueryStatus
from sglang_tuner.model.server_config import ServerConfig


@dataclass(frozen=True, slots=True)
class TargetStatus:
    """What the daemon knows about one SGLang server right now."""

    name: str
    url: str
    profile: str  # the configured one, else the one inferred from the traffic
    labels: Mapping[str, str] = field(default_factory=dict)
    profile_inferred: str | None = None  # why, when the profile was inferred, not configured
    up: bool | None = None  # None until the first scrape ends
    last_scrape_ts: float | None = None
    last_success_ts: float | None = None
    scrape_duration_seconds: float | None = None
    error_reason: str | None = None
    error: str | None = None
    sglang_version: str | None = None
    config: ServerConfig | None = None
    config_error: str | None = None
    samples_in_window: int = 0
    scrapes_total: int = 0
    failures_by_reason: Mapping[str, int] = field(default_factory=dict)
    duplicate_samples_total: int = 0  # samples its pages repeated (the first was read)
    signals: Mapping[str, float] = field(default_factory=dict)  # latest snapshot's values
    signal_sources: Mapping[str, str] = field(default_factory=dict)  # signal -> metrics/log/dcgm
    # its scrape task's own failures (an exception in its poll, log or config, not a failed
    # scrape): how many, whether the latest try failed, and the last error (redacted)
    task_failures_total: int = 0
    task_failing: bool = False
    task_error: str | None = None
    # its log's lines dropped unread (a pipe's buffer full) and cut at the length limit;
    # None without a log
    log_lines_dropped_total: int | None = None
    log_lines_cut_total: int | None = None


# Not frozen, for speed: built 230,000 times a round at 10,000 targets, and a frozen dataclass's
# __init__ takes four times as long. Never changed once built (nothing assigns to its fields).
@dataclass(slots=True)
class RuleResult:
    """One tuning rule evaluated for one target: health, outcome and alert state."""

    target: str
    rule: str
    severity: Severity
    health: Health
    outcome: Outcome | None = None
    error: str | None = None
    state: str = AlertState.INACTIVE
    active_at: float | None = None
    fired_at: float | None = None

    @property
    def condition_ratio(self) -> float | None:
        """Share of samples where the condition held, when the rule is a "frequently" rule."""
        return getattr(self.outcome, "condition_ratio", None)


@dataclass(frozen=True, slots=True)
class DatabaseStatus:
    """The state database: whether one is used, why it cannot be written, failed saves."""

    configured: bool = False
    error: str | None = None  # set while saves fail or one runs too long: state in memory only
    save_failures_total: int = 0
    recreated_total: int = 0  # found deleted or replaced while running, and rebuilt
    recreated: str | None = None  # why, the last time
    saves_skipped_total: int = 0  # due while the last save still ran (a slow disk, a lock)


class _WeakReferenceable:
    """A `__weakref__` slot for a slotted dataclass (`weakref_slot=True` needs Python 3.11)."""

    __slots__ = ("__weakref__",)


@dataclass(frozen=True, slots=True)
class Evaluation(_WeakReferenceable):
    """The latest complete evaluation; replaced whole, never mutated."""

    ts: float | None = None
    targets: Mapping[str, TargetStatus] = field(default_factory=dict)
    results: Mapping[str, tuple[RuleResult, ...]] = field(default_factory=dict)
    advice: tuple[Advice, ...] = ()
    plans: Mapping[str, Plan] = field(default_factory=dict)  # per target: the next change first
    changes: Mapping[str, tuple[Change, ...]] = field(default_factory=dict)  # newest last
    verdict_counts: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # target ->
    rule_evaluation_failures: Mapping[str, int] = field(default_factory=dict)
    alertmanager: AlertmanagerStatus = field(default_factory=AlertmanagerStatus)
    database: DatabaseStatus = field(default_factory=DatabaseStatus)
    evaluations_total: int = 0
    queries: tuple[QueryStatus, ...] = ()  # the Prometheus source's queries, in that mode
    shard: tuple[int, int] = (0, 1)  # this replica's (index, count)

    @property
    def is_ready(self) -> bool:
        """True once every target has been scraped and evaluated at least once (or its scrape
        task fails: that is shown, not waited for)."""
        return (
            self.ts is not None
            and self.source_problem() is None
            and all(t.up is not None or t.task_failing for t in self.targets.values())
        )

    def source_problem(self) -> str | None:
        """Why the Prometheus source has given nothing yet (no query of it has ever answered),
        or None: a Prometheus that never answers leaves the daemon not ready, saying why."""
        if not self.queries or any(
            q.runs_total > sum(q.failures_total.values()) for q in self.queries
        ):
            return None
        failed = next((q for q in self.queries if q.error), None)
        if failed is None:
            return "waiting for the first round of queries to Prometheus"
        return f"no query to Prometheus has answered yet: {failed.error}"

    def failing_tasks(self) -> list[str]:
        """One line per target whose scrape task fails, with its error."""
        return [f"target {t.name}: {t.task_error}" for t in self.targets.values() if t.task_failing]


class TunerState:
    """Holder of the latest `Evaluation`; the loop publishes, the API and exporter read."""

    def __init__(self, evaluation: Evaluation | None = None) -> None:
        self._latest = evaluation or Evaluation()
        self._subscribers: list[Callable[[Evaluation], None]] = []

    def latest(self) -> Evaluation:
        """The most recent evaluation (a reference swap makes this safe across threads)."""
        return self._latest

    def publish(self, evaluation: Evaluation) -> None:
        """Tell the subscribers, then replace the published evaluation: readers get the new one
        only once its answers are pre-rendered (with 10,000 targets that takes a second)."""
        for subscriber in self._subscribers:
            subscriber(evaluation)
        self._latest = evaluation

    def subscribe(self, subscriber: Callable[[Evaluation], None]) -> None:
        """Call `subscriber(evaluation)` on every publish, just before readers see it (e.g. to
        pre-render answers)."""
        self._subscribers.append(subscriber)
