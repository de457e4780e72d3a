"""Publish: the watched servers (each its state, latest judgement and plan) and alert state
become one `Evaluation`.

Pure functions: they read their inputs and build new values; the loop calls them and hands the
result to `TunerState.publish`. A server is read through `Reviewed`, the three things publishing
needs of it (`server.WatchedServer` is one).
"""

from collections.abc import Mapping
from typing import Protocol

from sglang_tuner.alerting.alertmanager_status import AlertmanagerStatus
from sglang_tuner.alerting.lifecycle import AlertTracker, Key
from sglang_tuner.evaluation import DatabaseStatus, Evaluation, RuleResult, TargetStatus
from sglang_tuner.judge import DEFAULT_PROFILE, Judgement, TargetJudgement
from sglang_tuner.model.advice import Advice, AlertState, Finding
from sglang_tuner.model.next_change import Plan
from sglang_tuner.model.scrape import QueryStatus
from sglang_tuner.model.secrets import redact_url_secrets
from sglang_tuner.model.window_histogram import is_bucket_signal
from sglang_tuner.target_state import TargetState


class Reviewed(Protocol):
    """A watched server as publishing reads it."""

    @property
    def state(self) -> TargetState: ...

    @property
    def judgement(self) -> TargetJudgement | None: ...

    @property
    def plan(self) -> Plan | None: ...


class TaskHealth(Protocol):
    """How a target's scrape task fares (the loop's supervisor counts it)."""

    @property
    def total(self) -> int: ...

    @property
    def in_a_row(self) -> int: ...

    @property
    def last_error(self) -> str: ...


class LogHealth(Protocol):
    """How a target's log source fares: lines lost or cut on the way in."""

    @property
    def dropped_lines(self) -> int: ...

    @property
    def lines_cut(self) -> int: ...


def active_advice(servers: Mapping[str, Reviewed], now: float) -> dict[Key, Advice]:
    """Advice for every (target, rule) whose finding holds in the target's latest judgement
    and is not held back by the target's plan."""
    active = {}
    for name, server in servers.items():
        judgement, plan = server.judgement, server.plan
        if judgement is None:
            continue
        for j in judgement.judgements:
            if j.finding is not None and (plan is None or j.rule.id in plan.advised):
                active[(name, j.rule.id)] = advice_for(j, j.finding, server.state, now)
    return active


def advice_for(j: Judgement, finding: Finding, target: TargetState, now: float) -> Advice:
    """The advice a finding gives (pending until the alert state says otherwise)."""
    rule = j.rule
    return Advice(
        target=target.name,
        rule=rule.id,
        severity=j.severity,
        state=str(AlertState.PENDING),
        since=now,
        summary=rule.summary,
        evidence=finding.evidence,
        action=finding.action,
        source=rule.source,
        confidence=finding.confidence,
        condition_ratio=finding.condition_ratio,
        labels=dict(target.spec.labels),
    )


def _profile_of(configured: str | None, judgement: TargetJudgement | None) -> str:
    """The profile the target is judged for: the configured one, else the latest inference."""
    if configured is not None:
        return configured
    return judgement.profile if judgement is not None else DEFAULT_PROFILE


def target_status(
    target: TargetState,
    judgement: TargetJudgement | None,
    task: TaskHealth | None = None,
    log: LogHealth | None = None,
) -> TargetStatus:
    """What the outputs show about one target (`task`: how its scrape task fares, when it
    ever failed; `log`: its log source, when it has one)."""
    spec, last, config = target.spec, target.last, target.config
    up = last is not None and last.is_up
    # a histogram's buckets ride with the samples for the window's quantiles; not signals
    signals = (
        {k: v for k, v in target.latest_values.items() if not is_bucket_signal(k)} if up else {}
    )
    return TargetStatus(
        name=spec.name,
        url=redact_url_secrets(spec.url),
        profile=_profile_of(spec.profile, judgement),
        profile_inferred=None if judgement is None else judgement.profile_inferred,
        labels=dict(spec.labels),
        up=None if last is None else last.is_up,
        last_scrape_ts=None if last is None else last.ts,
        last_success_ts=target.last_success_ts,
        scrape_duration_seconds=None if last is None else last.duration_seconds,
        error_reason=None if last is None else last.error_reason,
        error=None if last is None else last.error,
        sglang_version=config.version if config else None,
        config=config,
        config_error=target.config_error,
        samples_in_window=0 if judgement is None else judgement.samples,
        scrapes_total=target.scrapes_total,
        failures_by_reason=dict(target.failures),
        duplicate_samples_total=target.duplicate_samples_total,
        signals=signals,
        signal_sources=dict(target.signal_sources),
        task_failures_total=0 if task is None else task.total,
        task_failing=task is not None and task.in_a_row > 0,
        task_error=(task.last_error or None) if task is not None and task.in_a_row else None,
        log_lines_dropped_total=None if log is None else log.dropped_lines,
        log_lines_cut_total=None if log is None else log.lines_cut,
    )


def rule_results(
    name: str, judgement: TargetJudgement | None, tracker: AlertTracker
) -> tuple[RuleResult, ...]:
    """Each rule's health and outcome for one target, with its alert state."""
    if judgement is None:
        return ()
    out = []
    for j in judgement.judgements:
        state, active_at, fired_at = tracker.state_of((name, j.rule.id))
        severity = tracker.severity_of((name, j.rule.id)) or j.severity  # a live alert's own
        out.append(
            RuleResult(
                name,
                j.rule.id,
                severity,
                j.health,
                j.outcome,
                j.error,
                str(state),
                active_at,
                fired_at,
            )  # fmt: skip
        )
    return tuple(out)


# Per target: the judgement its rule results were last built from, and those results. Without a
# tracked alert a target's results depend on its judgement alone, and most targets are judged
# every evaluation interval while an evaluation is published every scrape interval: so they are
# built once per judgement, not once per publication (a second of the loop at 10,000 targets).
ResultsMemo = dict[str, tuple[TargetJudgement, tuple[RuleResult, ...]]]


def all_rule_results(
    servers: Mapping[str, Reviewed], tracker: AlertTracker, memo: ResultsMemo
) -> dict[str, tuple[RuleResult, ...]]:
    """`rule_results` of every target, reusing (and refreshing) `memo`."""
    alerted, out = tracker.targets(), {}
    for name, server in servers.items():
        judgement, seen = server.judgement, memo.get(name)
        if seen is not None and seen[0] is judgement and name not in alerted:
            out[name] = seen[1]
            continue
        out[name] = rule_results(name, judgement, tracker)
        if judgement is None or name in alerted:
            memo.pop(name, None)
        else:
            memo[name] = (judgement, out[name])
    for name in memo.keys() - servers.keys():
        del memo[name]
    return out


def build_evaluation(
    servers: Mapping[str, Reviewed],
    tracker: AlertTracker,
    *,
    rule_failures: Mapping[str, int],
    alertmanager: AlertmanagerStatus,
    database: DatabaseStatus | None = None,
    count: int,
    now: float,
    queries: tuple[QueryStatus, ...] = (),
    shard: tuple[int, int] = (0, 1),
    memo: ResultsMemo | None = None,
    tasks: Mapping[str, TaskHealth] | None = None,
    logs: Mapping[str, LogHealth] | None = None,
) -> Evaluation:
    """The immutable evaluation every output reads (`memo`: the rule results of the previous
    one, to reuse; `logs`: the log source of each target that has one)."""
    advice = sorted(tracker.advice(), key=lambda a: (a.target, a.rule))
    states = {n: s.state for n, s in servers.items()}
    tasks, logs = tasks or {}, logs or {}
    return Evaluation(
        ts=now,
        targets={
            n: target_status(s.state, s.judgement, tasks.get(n), logs.get(n))
            for n, s in servers.items()
        },
        results=all_rule_results(servers, tracker, {} if memo is None else memo),
        advice=tuple(a for a in advice if a.target in servers),
        plans={n: s.plan for n, s in servers.items() if s.plan is not None},
        changes={n: tuple(t.changes.changes) for n, t in states.items() if t.changes.changes},
        verdict_counts={n: dict(t.changes.verdicts) for n, t in states.items()},
        rule_evaluation_failures=dict(rule_failures),
        alertmanager=alertmanager,
        database=database or DatabaseStatus(),
        evaluations_total=count,
        queries=queries,
        shard=shard,
    )
