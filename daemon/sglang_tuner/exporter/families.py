"""The metric families the collector emits: names, HELP texts, labels, and how to add samples."""

from collections.abc import Callable, Mapping, Sequence

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
)

from sglang_tuner.model.signals import SIGNAL_UNITS

_KINDS: Mapping[str, Callable[..., Metric]] = {
    "gauge": GaugeMetricFamily,
    "counter": CounterMetricFamily,
    "info": InfoMetricFamily,
}

# name -> (kind, HELP text saying why it matters, label names). Counters drop `_total` here and
# info families drop `_info`; prometheus_client adds the suffix back on the samples.
Spec = tuple[str, str, tuple[str, ...]]


def _gauge(doc: str, *labels: str) -> Spec:
    return ("gauge", doc, labels)


def _counter(doc: str, *labels: str) -> Spec:
    return ("counter", doc, labels)


_T, _TR, _Q = ("target",), ("target", "rule"), ("query",)
SPECS: Mapping[str, Spec] = {
    "sglang_tuner_build": (
        "info",
        "Version of sglang-tuner running and the URL its API is reached at (always 1).",
        (),
    ),
    "sglang_tuner_shard": (
        "info",
        "This replica's shard: it watches the targets whose name hashes to `shard` mod "
        "`shard_count` (always 1).",
        (),
    ),
    "sglang_tuner_targets": _gauge("SGLang servers configured to watch."),
    "sglang_tuner_target_up": _gauge(
        "1 if the last scrape of the SGLang server succeeded; 0 means no fresh advice.", *_T
    ),
    "sglang_tuner_scrape_duration_seconds": _gauge(
        "Duration of the last scrape; near the timeout means the server is struggling.", *_T
    ),
    "sglang_tuner_scrapes": _counter("Scrapes attempted per SGLang server.", *_T),
    "sglang_tuner_scrape_failures": _counter(
        "Failed scrapes by reason; the reason says what to fix.", "target", "reason"
    ),
    "sglang_tuner_scrape_duplicate_samples": _counter(
        "Samples a server's pages repeated; the first of each series is read, as Prometheus does.",
        *_T,
    ),
    "sglang_tuner_last_success_timestamp_seconds": _gauge(
        "Unix time of the last successful scrape (0 = never); advice older is stale.", *_T
    ),
    "sglang_tuner_last_evaluation_timestamp_seconds": _gauge(
        "Unix time of the last rule evaluation; if it stops moving, advice is frozen."
    ),
    "sglang_tuner_evaluations": _counter("Evaluation rounds completed."),
    "sglang_tuner_rule_evaluation_failures": _counter(
        "Tuning-rule evaluations that raised; while it rises that rule gives no advice.", "rule"
    ),
    "sglang_tuner_rule_health": _gauge(
        "1 for the rule's current health (ok, err, no_data): could it judge the target.",
        *_TR,
        "health",
    ),
    "sglang_tuner_alertmanager_sends": _counter("Alertmanager POSTs attempted.", "alertmanager"),
    "sglang_tuner_alertmanager_send_failures": _counter(
        "Alertmanager POSTs that failed: advice is not reaching people.", "alertmanager"
    ),
    "sglang_tuner_alertmanager_alerts_sent": _counter(
        "Alerts delivered to Alertmanager.", "alertmanager"
    ),
    "sglang_tuner_alertmanager_queue_length": _gauge(
        "Alerts waiting to be sent; grows while Alertmanager is unreachable."
    ),
    "sglang_tuner_alertmanager_dropped": _counter(
        "Alerts dropped because the send queue was full: notifications were lost."
    ),
    "sglang_tuner_database_writable": _gauge(
        "1 while the state database takes writes; 0: state lives in memory only (see /readyz)."
    ),
    "sglang_tuner_database_recreated": _counter(
        "Times the state database file was found deleted or replaced while the daemon ran, "
        "and written anew from the state in memory."
    ),
    "sglang_tuner_database_save_failures": _counter(
        "Saves of state to the database that failed (read-only path, full disk)."
    ),
    "sglang_tuner_advice_active": _gauge(
        "1 while the tuning rule's advice is firing for the target: a flag to change.",
        *_TR,
        "severity",
    ),
    "sglang_tuner_advice_pending": _gauge(
        "1 while the advice is pending: the condition holds, the hold time is not over.",
        *_TR,
        "severity",
    ),
    "sglang_tuner_rule_condition_ratio": _gauge(
        "Share of the window's samples where the rule's condition held; fires at >= 0.5 "
        "(frequently_ratio).",
        *_TR,
    ),
    "sglang_tuner_health_score": _gauge(
        "Tuning health 0-100: minus 5/20/40 per firing info/warning/critical advice; 0 if down.",
        *_T,
    ),
    **{
        f"sglang_tuner_signal_{unit}": _gauge(
            f"Latest value of each canonical SGLang signal measured in {unit.replace('_', ' ')}, "
            "as the tuning rules see it.",
            "target",
            "signal",
        )
        for unit in SIGNAL_UNITS
    },
    "sglang_tuner_window_samples": _gauge(
        "Samples in the target's window; rules answer no_data until there are enough.", *_T
    ),
    "sglang_tuner_target": (
        "info",
        "A watched SGLang server: version, profile, the instance Prometheus knows it as, the "
        "model it serves and its configured labels (join on target).",
        _T,
    ),
    "sglang_tuner_advice": (
        "info",
        "Pending or firing advice with its change (flag, current, suggested) and texts: the one "
        "source the shipped alert rules read their annotations from.",
        _TR,
    ),
    "sglang_tuner_next_change": (
        "info",
        "Per target, the plan's next change: the rule, the flag, its current and suggested value.",
        _T,
    ),
    "sglang_tuner_change_effect_ratio": _gauge(
        "After/before ratio of a metric over the latest judged change of a flag (1 = no effect).",
        "target",
        "flag",
        "metric",
    ),
    "sglang_tuner_prometheus_query_up": _gauge(
        "1 if the query's last run against the Prometheus API succeeded; 0 fails every target.",
        *_Q,
    ),
    "sglang_tuner_prometheus_query_duration_seconds": _gauge(
        "Duration of the query's last run; near the timeout, the round is at risk.", *_Q
    ),
    "sglang_tuner_prometheus_query_series": _gauge(
        "Series in the query's last answer: about one per target (per mode).", *_Q
    ),
    "sglang_tuner_prometheus_queries": _counter("Runs of each Prometheus query.", *_Q),
    "sglang_tuner_prometheus_query_failures": _counter(
        "Failed runs of each Prometheus query by reason; a failure fails that round.",
        "query",
        "reason",
    ),
    "sglang_tuner_prometheus_query_warnings": _counter(
        "Answers that carried warnings (a partial response: some data may be missing).", *_Q
    ),
    "sglang_tuner_changes": _counter(
        "Changes of tuning flags judged, by verdict (helped, no_change, hurt, inconclusive).",
        "target",
        "verdict",
    ),
}


def new_families() -> dict[str, Metric]:
    return {
        name: _KINDS[kind](name, doc, labels=labels) for name, (kind, doc, labels) in SPECS.items()
    }


def add(families: Mapping[str, Metric], name: str, labels: Sequence[str], value: float) -> None:
    family = families[name]
    assert isinstance(family, GaugeMetricFamily | CounterMetricFamily)
    family.add_metric(labels, value)


def add_info(
    families: Mapping[str, Metric], name: str, labels: Sequence[str], value: dict[str, str]
) -> None:
    family = families[name]
    assert isinstance(family, InfoMetricFamily)
    family.add_metric(labels, value)
