"""The tuning-health page: self-metrics and tuning-health metrics built from one evaluation."""

import functools
import math
from collections.abc import Iterable, Mapping, Sequence

from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4

from sglang_tuner import __version__
from sglang_tuner.alerting.texts import DEFAULT_EXTERNAL_URL
from sglang_tuner.changes.verdict import VERDICTS
from sglang_tuner.evaluation import Evaluation, RuleResult, TargetStatus
from sglang_tuner.exporter.families import (
    Family,
    add,
    add_info,
    escape_label_value,
    exposition,
    new_families,
)
from sglang_tuner.exporter.labels import advice_labels, change_labels, target_info
from sglang_tuner.model.advice import AlertState, Health, Severity
from sglang_tuner.model.next_change import Plan
from sglang_tuner.model.scrape import QUERY_FAILURE_REASONS, SCRAPE_FAILURE_REASONS, QueryStatus
from sglang_tuner.model.signals import EXPORTED_AS
from sglang_tuner.rule import Rule

# Served whatever the scraper's Accept says: our names have no colons, and 0.0.4 text avoids the
# prometheus_client >= 0.23 OpenMetrics escaping path altogether (tooling.md §8).
METRICS_CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4

# Health-score penalty per firing advice: one critical problem costs more than a few hints.
SEVERITY_PENALTY: Mapping[Severity, float] = {
    Severity.INFO: 5.0,
    Severity.WARNING: 20.0,
    Severity.CRITICAL: 40.0,
}


def health_score(target: TargetStatus, results: Iterable[RuleResult]) -> float:
    """100 minus the penalty of each firing advice, floored at 0; 0 when the target is not up."""
    if target.up is not True:
        return 0.0
    penalty = sum(SEVERITY_PENALTY[r.severity] for r in results if r.state == AlertState.FIRING)
    return max(0.0, 100.0 - penalty)


class TunerCollector:
    """Builds every `sglang_tuner_*` family from an evaluation; never scrapes.

    A removed target simply has no series on the next page. Output, abridged::

        # HELP sglang_tuner_target_up 1 if the last scrape of the SGLang server succeeded; ...
        # TYPE sglang_tuner_target_up gauge
        sglang_tuner_target_up{target="gpu-a"} 1.0
        # TYPE sglang_tuner_scrape_failures_total counter
        sglang_tuner_scrape_failures_total{reason="timeout",target="gpu-a"} 0.0
        # TYPE sglang_tuner_advice_active gauge
        sglang_tuner_advice_active{rule="queue_empty",severity="info",target="gpu-a"} 1.0
        # TYPE sglang_tuner_rule_health gauge
        sglang_tuner_rule_health{health="no_data",rule="queue_empty",target="gpu-b"} 1.0
        # TYPE sglang_tuner_health_score gauge
        sglang_tuner_health_score{target="gpu-a"} 95.0
    """

    def __init__(self, rules: Sequence[Rule], external_url: str = "") -> None:
        """`rules` are the enabled tuning rules; `external_url` is the daemon's API as users
        reach it (for runbook links)."""
        self._rules = tuple(rules)
        self._external_url = external_url or DEFAULT_EXTERNAL_URL

    def text(self, evaluation: Evaluation) -> str:
        """The evaluation's families as Prometheus text format 0.0.4."""
        return exposition(self.families(evaluation).values())

    def families(self, evaluation: Evaluation) -> dict[str, Family]:
        """Every family, built from `evaluation` (empty families keep their header)."""
        families = new_families()
        _add_daemon(families, evaluation, self._rules, self._external_url)
        _add_advice(families, evaluation, self._external_url)
        for query in evaluation.queries:
            _add_query(families, query)
        for target in evaluation.targets.values():
            _add_target(families, target)
            _add_rules(families, target, evaluation.results.get(target.name, ()), self._rules)
            _add_changes(families, target.name, evaluation)
        return families


def _add_daemon(
    families: Mapping[str, Family], ev: Evaluation, rules: Sequence[Rule], external_url: str
) -> None:
    """Build info, evaluation freshness, rule failures and the Alertmanager push path."""
    info = {"version": __version__, "external_url": external_url}
    add_info(families, "sglang_tuner_build", [], info)
    index, count = ev.shard
    add_info(families, "sglang_tuner_shard", [], {"shard": str(index), "shard_count": str(count)})
    add(families, "sglang_tuner_targets", [], len(ev.targets))
    if ev.ts is not None:
        add(families, "sglang_tuner_last_evaluation_timestamp_seconds", [], ev.ts)
    add(families, "sglang_tuner_evaluations", [], ev.evaluations_total)
    failures = {rule.id: 0 for rule in rules} | dict(ev.rule_evaluation_failures)
    for rule_id, count in sorted(failures.items()):
        add(families, "sglang_tuner_rule_evaluation_failures", [rule_id], count)
    am = ev.alertmanager
    counters = {
        "sglang_tuner_alertmanager_sends": am.sends_total,
        "sglang_tuner_alertmanager_send_failures": am.send_failures_total,
        "sglang_tuner_alertmanager_alerts_sent": am.alerts_sent_total,
    }
    urls = sorted(set().union(*counters.values()))
    for name, counts in counters.items():
        for url in urls:
            add(families, name, [url], counts.get(url, 0))
    add(families, "sglang_tuner_alertmanager_queue_length", [], am.queue_length)
    add(families, "sglang_tuner_alertmanager_dropped", [], am.dropped_total)
    db = ev.database
    if db.configured:
        add(families, "sglang_tuner_database_writable", [], 0.0 if db.error else 1.0)
        add(families, "sglang_tuner_database_save_failures", [], db.save_failures_total)
        add(families, "sglang_tuner_database_recreated", [], db.recreated_total)
        add(families, "sglang_tuner_database_saves_skipped", [], db.saves_skipped_total)


def _add_query(families: Mapping[str, Family], q: QueryStatus) -> None:
    """One Prometheus-source query: last run, size, and counts (every reason at 0)."""
    name = q.name
    if q.ts is not None:
        add(families, "sglang_tuner_prometheus_query_up", [name], float(q.error_reason is None))
        add(families, "sglang_tuner_prometheus_query_series", [name], q.series)
    if q.duration_seconds is not None:
        duration = q.duration_seconds
        add(families, "sglang_tuner_prometheus_query_duration_seconds", [name], duration)
    add(families, "sglang_tuner_prometheus_queries", [name], q.runs_total)
    failures = dict.fromkeys(QUERY_FAILURE_REASONS, 0) | dict(q.failures_total)
    for reason, count in failures.items():
        add(families, "sglang_tuner_prometheus_query_failures", [name, reason], count)
    add(families, "sglang_tuner_prometheus_query_warnings", [name], q.warnings_total)


def _add_target(families: Mapping[str, Family], t: TargetStatus) -> None:
    """Scrape self-metrics, latest signals and window size of one target."""
    tl = f'target="{escape_label_value(t.name)}"'
    families["sglang_tuner_target_up"].sample(tl, 1.0 if t.up else 0.0)
    if t.scrape_duration_seconds is not None:
        families["sglang_tuner_scrape_duration_seconds"].sample(tl, t.scrape_duration_seconds)
    families["sglang_tuner_scrapes"].sample(tl, t.scrapes_total)
    failures = families["sglang_tuner_scrape_failures"]
    for reason, count in (_NO_FAILURES | dict(t.failures_by_reason)).items():
        failures.sample(f'{tl},reason="{escape_label_value(reason)}"', count)
    families["sglang_tuner_scrape_duplicate_samples"].sample(tl, t.duplicate_samples_total)
    families["sglang_tuner_target_task_failures"].sample(tl, t.task_failures_total)
    if t.log_lines_dropped_total is not None:  # a target with a log
        families["sglang_tuner_log_lines_dropped"].sample(tl, t.log_lines_dropped_total)
        families["sglang_tuner_log_lines_cut"].sample(tl, t.log_lines_cut_total or 0)
    last_success = families["sglang_tuner_last_success_timestamp_seconds"]
    last_success.sample(tl, t.last_success_ts or 0.0)
    for signal, value in sorted(t.signals.items()):
        unit, label, factor = EXPORTED_AS.get(signal, ("", "", 1.0))
        if unit and not math.isnan(value):  # NaN means "not exposed": no series, no fake value
            families[f"sglang_tuner_signal_{unit}"].sample(f'{tl},signal="{label}"', value * factor)
    families["sglang_tuner_window_samples"].sample(tl, t.samples_in_window)
    add_info(families, "sglang_tuner_target", [t.name], target_info(t))


_NO_FAILURES = dict.fromkeys(SCRAPE_FAILURE_REASONS, 0)


def _add_advice(families: Mapping[str, Family], ev: Evaluation, external_url: str) -> None:
    """Each pending and firing advice with its change, and each target's next change."""
    for a in ev.advice:
        add_info(
            families, "sglang_tuner_advice", [a.target, a.rule], advice_labels(a, external_url)
        )
    for target, plan in sorted(ev.plans.items()):
        if plan.next is not None:
            act = plan.next.action
            info = {"rule": plan.next.rule, "action": act.text, **change_labels(act)}
            add_info(families, "sglang_tuner_next_change", [target], info)
        _add_service_levels(families, target, plan)


def _add_service_levels(families: Mapping[str, Family], target: str, plan: Plan) -> None:
    """Each level the plan holds changes to, and whether the window meets it (where measured)."""
    for level in plan.service_levels.levels:
        add(families, "sglang_tuner_service_level_bound", [target, level.objective], level.bound)
        now = plan.measured.get(level.objective)
        if now is not None:
            met = 1.0 if level.met_by(now) else 0.0
            labels = [target, level.objective, level.source]
            add(families, "sglang_tuner_service_level_met", labels, met)


def _add_rules(
    families: Mapping[str, Family],
    t: TargetStatus,
    results: Sequence[RuleResult],
    rules: Sequence[Rule],
) -> None:
    """Advice state for every rule x target, rule health, condition ratios and the health score.

    About 130 samples a target (a million and more at 10,000 targets): each line is the
    target's label, rendered once, and the rule's labels, rendered once per page."""
    tl = f'target="{escape_label_value(t.name)}"'
    by_rule = {r.rule: r for r in results}
    severities = {rule.id: rule.severity for rule in rules} | {r.rule: r.severity for r in results}
    active = families["sglang_tuner_advice_active"]
    pending = families["sglang_tuner_advice_pending"]
    for rule_id, severity in severities.items():
        state = by_rule[rule_id].state if rule_id in by_rule else AlertState.INACTIVE
        labels = f"{tl},{_rule_labels(rule_id, severity)}"
        active.sample(labels, 1.0 if state == AlertState.FIRING else 0.0)
        pending.sample(labels, 1.0 if state == AlertState.PENDING else 0.0)
    health = families["sglang_tuner_rule_health"]
    ratio = families["sglang_tuner_rule_condition_ratio"]
    for r in results:
        rule = f'{tl},rule="{escape_label_value(r.rule)}"'
        for value in _HEALTHS:
            health.sample(f'{rule},health="{value}"', 1.0 if r.health == value else 0.0)
        if r.condition_ratio is not None:
            ratio.sample(rule, r.condition_ratio)
    if t.up is not None:  # before the first scrape ends there is nothing to score
        families["sglang_tuner_health_score"].sample(tl, health_score(t, results))


_HEALTHS = tuple(h.value for h in Health)


@functools.cache
def _rule_labels(rule_id: str, severity: Severity) -> str:
    return f'rule="{escape_label_value(rule_id)}",severity="{escape_label_value(str(severity))}"'


def _add_changes(families: Mapping[str, Family], target: str, ev: Evaluation) -> None:
    """Judged changes by verdict, and the effect of the latest judged change on each metric."""
    counts = dict.fromkeys(VERDICTS, 0) | dict(ev.verdict_counts.get(target, {}))
    for verdict, count in sorted(counts.items()):
        add(families, "sglang_tuner_changes", [target, verdict], count)
    judged = [c for c in ev.changes.get(target, ()) if c.verdict is not None]
    if not judged or judged[-1].verdict is None:
        return
    change, metrics = judged[-1], judged[-1].verdict.metrics
    for flag in change.after:
        for m in metrics:
            if m.effect_ratio is not None:
                labels = [target, flag, m.metric]
                add(families, "sglang_tuner_change_effect_ratio", labels, m.effect_ratio)
