"""The metric families the daemon exports: names, HELP texts, labels, and their text exposition.

A family is written as Prometheus text format 0.0.4 lines as its samples are added: at 10,000
targets the page has about two million samples, and building prometheus_client's sample tuples
for each, then formatting them, took 17 to 31 s a page (docs/performance.md). The lines are the
ones prometheus_client writes (its float formatting, its escaping); tests parse them with its
parser and check them with `promtool check metrics`.
"""

from collections.abc import Iterable, Mapping, Sequence

from prometheus_client.utils import floatToGoString

from sglang_tuner.model.signals import SIGNAL_UNITS

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
    "sglang_tuner_log_lines_dropped": _counter(
        "Log lines dropped unread from a piped log (its buffer was full: the scrapes fell "
        "behind the writer); its signals missed them.",
        *_T,
    ),
    "sglang_tuner_log_lines_cut": _counter(
        "Log lines longer than 32 KiB, cut there while read (the rest skipped).", *_T
    ),
    "sglang_tuner_target_task_failures": _counter(
        "Exceptions in a target's own poll, log or config work (logged with its name); the "
        "task goes on with back-off.",
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
    "sglang_tuner_database_saves_skipped": _counter(
        "Saves of state not started because the last one still ran (a slow or frozen disk, "
        "the file locked): the next save writes what they would have."
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
    "sglang_tuner_service_level_met": _gauge(
        "Per target and objective (tok/s, TTFT p99, ITL p50, ITL p99): 1 while the window's "
        "median meets the service level the plan holds changes to, 0 while it breaks it; "
        "`source` says whose level it is (set, default, inferred).",
        "target",
        "objective",
        "source",
    ),
    "sglang_tuner_service_level_bound": _gauge(
        "Per target and objective, the service level itself: seconds at most for a latency, "
        "tokens per second at least for tok/s (the `objective` label says which).",
        "target",
        "objective",
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
        "Changes of tuning flags judged, by verdict "
        "(helped, traded, no_change, hurt, inconclusive).",
        "target",
        "verdict",
    ),
}


class Family:
    """One metric family as text: its `# HELP` and `# TYPE` header and its sample lines.

    Counters are named without `_total` in SPECS and info families without `_info`; the samples
    carry the suffix, as prometheus_client writes them. Label values are escaped as the text
    format asks (backslash, double quote, newline).
    """

    __slots__ = ("name", "kind", "sample_name", "label_names", "header", "lines")

    def __init__(self, name: str, kind: str, doc: str, label_names: Sequence[str]) -> None:
        self.name = name
        self.kind = kind
        suffix = {"counter": "_total", "info": "_info"}.get(kind, "")
        self.sample_name = name + suffix
        self.label_names = tuple(label_names)
        help_text = doc.replace("\\", r"\\").replace("\n", r"\n")
        text_type = "gauge" if kind == "info" else kind
        self.header = (
            f"# HELP {self.sample_name} {help_text}\n# TYPE {self.sample_name} {text_type}\n"
        )
        self.lines: list[str] = []

    def sample(self, labels: str, value: float) -> None:
        """One sample; `labels` is the text between the braces (`target="a",rule="b"`), its
        values escaped already (the collector renders each target's label once per page)."""
        self.lines.append(f"{self.sample_name}{{{labels}}} {number(value)}\n")

    def text(self) -> str:
        """The header and every sample line, each ending in a newline."""
        return self.header + "".join(self.lines)


def new_families() -> dict[str, Family]:
    """An empty family for every name in SPECS, in SPECS's order (the page's order)."""
    return {name: Family(name, kind, doc, labels) for name, (kind, doc, labels) in SPECS.items()}


def number(value: float) -> str:
    """A sample value as prometheus_client writes it (`1.0`, `1e+20`, `NaN`, `+Inf`); 0 and 1,
    most of the page's values, without the general formatter."""
    if value == 0:
        return "0.0"
    if value == 1:
        return "1.0"
    text: str = floatToGoString(value)  # type: ignore[no-untyped-call]
    return text


def escape_label_value(value: str) -> str:
    """A label value as the text format writes it between double quotes."""
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", r"\\").replace('"', r"\"").replace("\n", r"\n")
    return value


def label_text(pairs: Iterable[tuple[str, str]]) -> str:
    """`a="x",b="y"` for the pairs in their order, the values escaped."""
    return ",".join(f'{k}="{escape_label_value(v)}"' for k, v in pairs)


def add(families: Mapping[str, Family], name: str, labels: Sequence[str], value: float) -> None:
    """One gauge or counter sample with its label values, in SPECS's label order."""
    family = families[name]
    assert family.kind != "info", name
    family.sample(label_text(zip(family.label_names, labels, strict=True)), value)


def add_info(
    families: Mapping[str, Family], name: str, labels: Sequence[str], value: Mapping[str, str]
) -> None:
    """One info sample (value 1): the family's labels, then the info labels by name."""
    family = families[name]
    assert family.kind == "info", name
    own = dict(zip(family.label_names, labels, strict=True))
    extra = sorted((k, v) for k, v in value.items() if k not in own)
    family.sample(label_text([*own.items(), *extra]), 1.0)


def exposition(families: Iterable[Family]) -> str:
    """The families as one text-format page."""
    return "".join(family.text() for family in families)
