"""TunerCollector: every family from an evaluation, as Prometheus text format 0.0.4."""

import math
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from sglang_tuner import __version__
from sglang_tuner.alerting.alertmanager_status import AlertmanagerStatus
from sglang_tuner.changes.record import Change
from sglang_tuner.changes.verdict import MetricVerdict, Verdict, WindowSummary
from sglang_tuner.evaluation import DatabaseStatus, Evaluation, RuleResult, TargetStatus, TunerState
from sglang_tuner.exporter.collector import (
    METRICS_CONTENT_TYPE,
    TunerCollector,
    health_score,
)
from sglang_tuner.exporter.page import MetricsPage
from sglang_tuner.exporter.reloads import ReloadStatus
from sglang_tuner.model.advice import (
    Action,
    Advice,
    AlertState,
    Confidence,
    Finding,
    Health,
    NoData,
    Pass,
    Severity,
)
from sglang_tuner.model.next_change import Plan, Step
from sglang_tuner.model.scrape import SCRAPE_FAILURE_REASONS, QueryStatus
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.model.service_levels import AppliedLevels, Level
from sglang_tuner.rule import Rule

NOW = 1_795_000_000.0
AM = "http://am:9093"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def _rule(rule_id: str, severity: Severity) -> Rule:
    return Rule(
        id=rule_id,
        severity=severity,
        summary=f"{rule_id} summary.",
        action="Change a flag.",
        source="Hyperparameter Tuning",
        check=lambda _inp: Pass(),
    )


RULES = (
    _rule("queue_empty", Severity.INFO),
    _rule("scheduler_too_conservative", Severity.WARNING),
    _rule("retractions_frequent", Severity.CRITICAL),
)


def _result(target: str, rule: str, severity: Severity, **kw: object) -> RuleResult:
    return RuleResult(target=target, rule=rule, severity=severity, **kw)  # type: ignore[arg-type]


def _evaluation(with_down_target: bool = True) -> Evaluation:
    finding = Finding("held in 83% of 60 samples", Action("x"), Confidence.HIGH, 0.83, 60)
    targets = {
        "gpu-a": TargetStatus(
            "gpu-a",
            "http://a:30000",
            "offline",
            up=True,
            scrape_duration_seconds=0.04,
            last_success_ts=NOW - 5,
            sglang_version="0.5.9",
            samples_in_window=60,
            scrapes_total=100,
            failures_by_reason={"timeout": 2},
            signals={
                "token_usage": 0.41,
                "num_queue_reqs": 7.0,
                "ttft_p99_seconds": math.nan,
                "retractions_per_minute": 30.0,
                "startup_available_gpu_mem_gb": 6.5,
                "num_used_tokens": 9000.0,
                "gen_throughput": 4000.0,
                "ttft_p50_seconds": 0.2,
                "restarts": 0.0,
            },
            labels={"cluster": "eu-1"},
            config=ServerConfig(model_path="meta-llama/Llama-3.1-8B-Instruct"),
            log_lines_dropped_total=12,
            log_lines_cut_total=3,
        ),
        "gpu-c": TargetStatus(
            "gpu-c",
            "http://c:30000",
            "online",
            up=False,
            error_reason="conn_refused",
            scrapes_total=3,
            failures_by_reason={"conn_refused": 3},
        ),
    }
    results = {
        "gpu-a": (
            _result("gpu-a", "queue_empty", Severity.INFO, health=Health.OK, outcome=Pass(0.1, 60)),
            _result(
                "gpu-a",
                "scheduler_too_conservative",
                Severity.WARNING,
                health=Health.OK,
                outcome=finding,
                state=AlertState.FIRING,
            ),
            _result(
                "gpu-a",
                "retractions_frequent",
                Severity.CRITICAL,
                health=Health.NO_DATA,
                outcome=NoData("window has 3 of the 6 samples needed", 15.0),
            ),
        ),
    }
    if not with_down_target:
        targets.pop("gpu-c")
    return Evaluation(
        ts=NOW,
        targets=targets,
        results=results,
        rule_evaluation_failures={"retractions_frequent": 4},
        alertmanager=AlertmanagerStatus(
            sends_total={AM: 5}, send_failures_total={AM: 1}, alerts_sent_total={AM: 4}
        ),
        database=DatabaseStatus(
            configured=True, error=None, save_failures_total=2, saves_skipped_total=4
        ),
        evaluations_total=42,
        changes={"gpu-a": (CHANGE,)},
        advice=(ADVICE,),
        plans={
            "gpu-a": Plan(
                "gpu-a",
                next=Step("scheduler_too_conservative", Severity.WARNING, ADVICE.action, "s"),
                service_levels=AppliedLevels(
                    "online",
                    (
                        Level("TTFT p99", 2.0, "default", False),
                        Level("ITL p50", 0.05, "set"),
                        Level("tok/s", 1000.0, "set"),
                    ),
                ),
                measured={"TTFT p99": 3.1, "ITL p50": 0.04},  # tok/s not measured yet
            )
        },  # fmt: skip
        verdict_counts={"gpu-a": {"helped": 1}},
        queries=(QUERY,),
        shard=(1, 3),
    )


QUERY = QueryStatus(
    "num_queue_reqs", "sum by (instance, job) (...)", ts=NOW, duration_seconds=0.2, series=2,
    error_reason="timeout", error="no answer", runs_total=7, failures_total={"timeout": 1},
    warnings_total=2,
)  # fmt: skip


EMPTY = WindowSummary(0.0, 0.0, {}, {})
ADVICE = Advice(
    "gpu-a", "scheduler_too_conservative", Severity.WARNING, "firing", NOW, "s", "evidence",
    Action("--schedule-conservativeness 1 -> 0.3", "--schedule-conservativeness", "1", "0.3"),
    "src", Confidence.HIGH,
)  # fmt: skip
CHANGE = Change(
    target="gpu-a", at=NOW - 900, kind="flags", before={"--schedule-conservativeness": "3"},
    after={"--schedule-conservativeness": "0.7"}, rule="scheduler_too_conservative",
    profile="offline", before_window=EMPTY, due=NOW - 300,
    verdict=Verdict("helped", "better: gen_throughput", (
        MetricVerdict("gen_throughput", "helped", 1.18, 1.12, 1.24, 3900.0, 4600.0),
        MetricVerdict("retractions_per_minute", "inconclusive", None, None, None, 0.0, 0.0),
    )),
)  # fmt: skip


def test_collector_exports_the_latest_changes_effect_and_verdict_counts(registry) -> None:
    labels = {"target": "gpu-a", "flag": "--schedule-conservativeness", "metric": "gen_throughput"}
    assert _value(registry, "sglang_tuner_change_effect_ratio", **labels) == 1.18
    assert _value(registry, "sglang_tuner_changes_total", target="gpu-a", verdict="helped") == 1
    assert _value(registry, "sglang_tuner_changes_total", target="gpu-a", verdict="hurt") == 0
    assert _value(registry, "sglang_tuner_changes_total", target="gpu-c", verdict="hurt") == 0


@pytest.fixture
def state() -> TunerState:
    return TunerState(_evaluation())


class Page:
    """The collector's page over what a state publishes, read with prometheus_client's parser
    (as Prometheus reads it)."""

    def __init__(self, latest: Callable[[], Evaluation]) -> None:
        self.latest = latest
        self.collector = TunerCollector(RULES)

    def render(self) -> tuple[bytes, str]:
        return self.collector.text(self.latest()).encode(), METRICS_CONTENT_TYPE

    def value(self, name: str, labels: dict[str, str]) -> float | None:
        text = self.render()[0].decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and sample.labels == labels:
                    return sample.value
        return None


@pytest.fixture
def registry(state: TunerState) -> Page:
    return Page(state.latest)


def _value(page: Page, name: str, **labels: str) -> float | None:
    return page.value(name, labels)


def test_collector_exports_each_prometheus_query_and_the_shard(registry) -> None:
    q = {"query": "num_queue_reqs"}
    assert _value(registry, "sglang_tuner_prometheus_query_up", **q) == 0.0
    assert _value(registry, "sglang_tuner_prometheus_query_duration_seconds", **q) == 0.2
    assert _value(registry, "sglang_tuner_prometheus_query_series", **q) == 2
    assert _value(registry, "sglang_tuner_prometheus_queries_total", **q) == 7
    assert _value(registry, "sglang_tuner_prometheus_query_warnings_total", **q) == 2
    failures = "sglang_tuner_prometheus_query_failures_total"
    assert _value(registry, failures, **q, reason="timeout") == 1
    assert _value(registry, failures, **q, reason="rejected") == 0
    assert _value(registry, "sglang_tuner_shard_info", shard="1", shard_count="3") == 1


def test_collector_target_up_reflects_last_scrape(registry: Page) -> None:
    assert _value(registry, "sglang_tuner_target_up", target="gpu-a") == 1.0
    assert _value(registry, "sglang_tuner_target_up", target="gpu-c") == 0.0
    assert _value(registry, "sglang_tuner_targets") == 2.0


def test_collector_scrape_failures_preinitialised_for_every_reason(
    registry: Page,
) -> None:
    for target in ("gpu-a", "gpu-c"):
        for reason in SCRAPE_FAILURE_REASONS:
            value = _value(
                registry, "sglang_tuner_scrape_failures_total", target=target, reason=reason
            )
            assert value is not None
    assert (
        _value(registry, "sglang_tuner_scrape_failures_total", target="gpu-a", reason="timeout")
        == 2
    )
    assert (
        _value(registry, "sglang_tuner_scrape_failures_total", target="gpu-a", reason="parse") == 0
    )


def test_collector_scrape_self_metrics_carry_values(registry: Page) -> None:
    assert _value(registry, "sglang_tuner_scrapes_total", target="gpu-a") == 100
    assert _value(registry, "sglang_tuner_scrape_duration_seconds", target="gpu-a") == 0.04
    assert _value(registry, "sglang_tuner_scrape_duration_seconds", target="gpu-c") is None
    assert (
        _value(registry, "sglang_tuner_last_success_timestamp_seconds", target="gpu-a") == NOW - 5
    )
    assert _value(registry, "sglang_tuner_last_success_timestamp_seconds", target="gpu-c") == 0
    assert _value(registry, "sglang_tuner_window_samples", target="gpu-a") == 60


def test_collector_removed_target_leaves_no_series(state: TunerState, registry: Page) -> None:
    assert _value(registry, "sglang_tuner_target_up", target="gpu-c") == 0.0
    state.publish(_evaluation(with_down_target=False))
    body, _ = registry.render()
    assert 'target="gpu-c"' not in body.decode()
    assert _value(registry, "sglang_tuner_targets") == 1.0


def test_collector_advice_active_one_only_while_firing(registry: Page) -> None:
    labels = {"target": "gpu-a", "rule": "scheduler_too_conservative", "severity": "warning"}
    assert _value(registry, "sglang_tuner_advice_active", **labels) == 1.0
    assert _value(registry, "sglang_tuner_advice_pending", **labels) == 0.0
    quiet = {"target": "gpu-a", "rule": "queue_empty", "severity": "info"}
    assert _value(registry, "sglang_tuner_advice_active", **quiet) == 0.0


def test_collector_advice_series_exist_for_every_rule_and_target(
    registry: Page,
) -> None:
    for rule in RULES:
        labels = {"target": "gpu-c", "rule": rule.id, "severity": rule.severity.value}
        assert _value(registry, "sglang_tuner_advice_active", **labels) == 0.0
        assert _value(registry, "sglang_tuner_advice_pending", **labels) == 0.0


def test_collector_advice_pending_follows_the_rule_results_alert_state(state: TunerState) -> None:
    ev = _evaluation()
    pending = _result(
        "gpu-a", "queue_empty", Severity.INFO, health=Health.OK, state=AlertState.PENDING
    )
    results = {**ev.results, "gpu-a": (pending,)}
    state.publish(Evaluation(ts=ev.ts, targets=ev.targets, results=results))
    reg = Page(state.latest)
    labels = {"target": "gpu-a", "rule": "queue_empty", "severity": "info"}
    assert _value(reg, "sglang_tuner_advice_pending", **labels) == 1.0
    assert _value(reg, "sglang_tuner_advice_active", **labels) == 0.0


def test_collector_rule_health_is_one_hot(registry: Page) -> None:
    got = {
        h.value: _value(
            registry, "sglang_tuner_rule_health", target="gpu-a", rule="retractions_frequent",
            health=h.value,
        )
        for h in Health
    }  # fmt: skip
    assert got == {"ok": 0.0, "err": 0.0, "no_data": 1.0}


def test_collector_condition_ratio_only_when_evaluated(registry: Page) -> None:
    name = "sglang_tuner_rule_condition_ratio"
    assert _value(registry, name, target="gpu-a", rule="scheduler_too_conservative") == 0.83
    assert _value(registry, name, target="gpu-a", rule="queue_empty") == 0.1
    assert _value(registry, name, target="gpu-a", rule="retractions_frequent") is None


def test_collector_health_score_penalises_firing_and_down(registry: Page) -> None:
    assert _value(registry, "sglang_tuner_health_score", target="gpu-a") == 80.0
    assert _value(registry, "sglang_tuner_health_score", target="gpu-c") == 0.0


def test_collector_signals_one_family_per_unit_in_base_units(registry: Page) -> None:
    ratio, requests = "sglang_tuner_signal_ratio", "sglang_tuner_signal_requests"
    assert _value(registry, ratio, target="gpu-a", signal="token_usage") == 0.41
    assert _value(registry, requests, target="gpu-a", signal="waiting") == 7
    per_second = "sglang_tuner_signal_requests_per_second"
    assert _value(registry, per_second, target="gpu-a", signal="retracted") == 0.5  # 30/min
    assert _value(registry, "sglang_tuner_signal_bytes", target="gpu-a",
                  signal="startup_available_gpu_mem") == 6.5 * 2**30  # fmt: skip


def test_collector_signal_skips_values_not_exposed(registry: Page) -> None:
    assert (
        _value(registry, "sglang_tuner_signal_seconds", target="gpu-a", signal="ttft_p99") is None
    )


def test_collector_info_families_join_target_to_instance_model_and_labels(registry) -> None:
    build = "sglang_tuner_build_info"
    assert _value(registry, build, version=__version__, external_url="http://localhost:9877") == 1
    info = "sglang_tuner_target_info"
    labels = {
        "target": "gpu-a", "sglang_version": "0.5.9", "profile": "offline",
        "instance": "a:30000", "model_name": "meta-llama/Llama-3.1-8B-Instruct", "cluster": "eu-1",
    }  # fmt: skip
    assert _value(registry, info, **labels) == 1
    assert _value(registry, info, target="gpu-c", sglang_version="unknown", profile="online",
                  instance="c:30000", model_name="unknown") == 1  # fmt: skip


def test_collector_exports_each_advice_with_its_change_and_the_next_change(registry) -> None:
    advice = {
        "target": "gpu-a", "rule": "scheduler_too_conservative", "severity": "warning",
        "state": "firing", "summary": "s", "action": "--schedule-conservativeness 1 -> 0.3",
        "source": "src", "confidence": "high", "flag": "--schedule-conservativeness",
        "current": "1", "suggested": "0.3",
        "runbook_url": "http://localhost:9877/runbook/scheduler_too_conservative",
    }  # fmt: skip
    assert _value(registry, "sglang_tuner_advice_info", **advice) == 1
    nxt = {
        "target": "gpu-a", "rule": "scheduler_too_conservative",
        "action": "--schedule-conservativeness 1 -> 0.3", "flag": "--schedule-conservativeness",
        "current": "1", "suggested": "0.3",
    }  # fmt: skip
    assert _value(registry, "sglang_tuner_next_change_info", **nxt) == 1


def test_collector_exports_each_service_level_and_whether_the_window_meets_it(registry) -> None:
    met, bound = "sglang_tuner_service_level_met", "sglang_tuner_service_level_bound"
    assert _value(registry, met, target="gpu-a", objective="TTFT p99", source="default") == 0
    assert _value(registry, met, target="gpu-a", objective="ITL p50", source="set") == 1
    assert _value(registry, met, target="gpu-a", objective="tok/s", source="set") is None
    assert _value(registry, bound, target="gpu-a", objective="TTFT p99") == 2.0
    assert _value(registry, bound, target="gpu-a", objective="tok/s") == 1000.0


def test_collector_daemon_counters_from_evaluation(registry: Page) -> None:
    assert _value(registry, "sglang_tuner_evaluations_total") == 42
    assert _value(registry, "sglang_tuner_last_evaluation_timestamp_seconds") == NOW
    failures = "sglang_tuner_rule_evaluation_failures_total"
    assert _value(registry, failures, rule="retractions_frequent") == 4
    assert _value(registry, failures, rule="queue_empty") == 0


def test_collector_alertmanager_counters_per_url(registry: Page) -> None:
    assert _value(registry, "sglang_tuner_alertmanager_sends_total", alertmanager=AM) == 5
    assert _value(registry, "sglang_tuner_alertmanager_send_failures_total", alertmanager=AM) == 1
    assert _value(registry, "sglang_tuner_alertmanager_alerts_sent_total", alertmanager=AM) == 4
    assert _value(registry, "sglang_tuner_alertmanager_queue_length") == 0
    assert _value(registry, "sglang_tuner_alertmanager_dropped_total") == 0


def test_collector_empty_evaluation_exports_daemon_metrics_only() -> None:
    reg = Page(Evaluation)
    assert _value(reg, "sglang_tuner_targets") == 0.0
    assert _value(reg, "sglang_tuner_last_evaluation_timestamp_seconds") is None
    assert 'target="' not in reg.render()[0].decode()


def test_render_metrics_is_prometheus_0_0_4_with_our_prefix(registry: Page) -> None:
    body, content_type = registry.render()
    assert content_type.startswith("text/plain; version=0.0.4")
    families = list(text_string_to_metric_families(body.decode()))
    assert families
    for family in families:
        assert family.documentation, family.name
        for sample in family.samples:
            assert sample.name.startswith("sglang_tuner_") and ":" not in sample.name


def test_docs_metrics_lists_exactly_the_exported_names(registry: Page) -> None:
    body, _ = registry.render()
    reloads = generate_latest(_reload_registry()).decode()  # the page's live part
    text = body.decode() + reloads
    exported = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
    documented = set(re.findall(r"`(sglang_tuner_[a-z_]+)", DOCS.read_text()))
    assert exported == documented
    # the process families the page adds live, named in the docs (`python_gc_*` a prefix)
    page = MetricsPage(TunerCollector(RULES), registry.latest).body().decode()
    served = {s.name for f in text_string_to_metric_families(page) for s in f.samples}
    for name in re.findall(r"`((?:process|python)_[a-z_]+\*?)`", DOCS.read_text()):
        assert any(s == name or s.startswith(name.rstrip("*")) for s in served), name


def _reload_registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(ReloadStatus())
    return registry


@pytest.mark.parametrize(
    ("up", "firing", "expected"),
    [
        (True, [], 100.0),
        (True, [Severity.INFO], 95.0),
        (True, [Severity.WARNING, Severity.CRITICAL], 40.0),
        (True, [Severity.CRITICAL] * 3, 0.0),
        (False, [], 0.0),
        (None, [], 0.0),
    ],
)
def test_health_score_penalises_firing_advice(
    up: bool | None, firing: list[Severity], expected: float
) -> None:
    target = TargetStatus("t", "http://t", "offline", up=up)
    results = [
        _result("t", f"r{i}", s, health=Health.OK, state=AlertState.FIRING)
        for i, s in enumerate(firing)
    ]
    assert health_score(target, results) == expected


def test_health_score_ignores_pending_advice() -> None:
    target = TargetStatus("t", "http://t", "offline", up=True)
    results = [_result("t", "r", Severity.CRITICAL, health=Health.OK, state=AlertState.PENDING)]
    assert health_score(target, results) == 100.0


def test_every_canonical_signal_is_exported_in_one_unit():
    from sglang_tuner.model.signals import ALL_SIGNALS, EXPORTED_AS

    assert set(ALL_SIGNALS) == set(EXPORTED_AS)
    labels = [(unit, label) for unit, label, _ in EXPORTED_AS.values()]
    assert len(labels) == len(set(labels))  # no two signals share a family and label


def test_database_metrics_say_whether_state_is_being_saved(registry: Page) -> None:
    assert _value(registry, "sglang_tuner_database_writable") == 1.0
    assert _value(registry, "sglang_tuner_database_save_failures_total") == 2.0
    assert _value(registry, "sglang_tuner_database_saves_skipped_total") == 4.0


def test_log_line_counts_only_for_a_target_with_a_log(registry: Page) -> None:
    assert _value(registry, "sglang_tuner_log_lines_dropped_total", target="gpu-a") == 12.0
    assert _value(registry, "sglang_tuner_log_lines_cut_total", target="gpu-a") == 3.0
    assert _value(registry, "sglang_tuner_log_lines_cut_total", target="gpu-c") is None
