"""Publish: target state, judgements and alert state become one immutable evaluation."""

from sglang_tuner.alerting.alertmanager_status import AlertmanagerStatus
from sglang_tuner.alerting.lifecycle import AlertTracker
from sglang_tuner.judge import Judgement, TargetJudgement
from sglang_tuner.model.advice import Action, Confidence, Finding, Health, NoData, Pass, Severity
from sglang_tuner.model.scrape import ScrapeResult, Snapshot
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.model.target_spec import TargetSpec
from sglang_tuner.publish import active_advice, build_evaluation, rule_results, target_status
from sglang_tuner.rule import Rule
from sglang_tuner.target_state import TargetState

from tests.helpers import reviewed

RULE = Rule(
    id="queue_empty", severity=Severity.INFO, summary="Queue is empty.", action="Submit faster.",
    source="Hyperparameter Tuning", check=lambda _i: Pass(),
)  # fmt: skip
OTHER = Rule(
    id="queue_too_long", severity=Severity.WARNING, summary="s", action="a", source="t",
    check=lambda _i: Pass(),
)  # fmt: skip
FINDING = Finding(
    "queue was 0 in 90% of 60 samples", Action("client: faster"), Confidence.HIGH, 0.9
)


def _target(name: str = "gpu-a") -> TargetState:
    spec = TargetSpec(name, f"http://{name}:30000", labels={"cluster": "eu-1"})
    target = TargetState(spec, 10)
    target.apply_server_info(ServerConfig(version="0.5.23"), None)
    target.ingest(ScrapeResult(name, 100.0, 0.02, Snapshot(name, 100.0, {"num_queue_reqs": 0.0})))
    return target


def _judged(ts: float = 100.0) -> TargetJudgement:
    judgements = (
        Judgement(RULE, Health.OK, Severity.INFO, FINDING),
        Judgement(OTHER, Health.NO_DATA, Severity.WARNING, NoData("window too short", 5.0)),
    )
    return TargetJudgement(ts, True, 12, judgements)


def test_active_advice_is_one_per_finding_with_the_targets_labels():
    advice = active_advice(reviewed({"gpu-a": _target()}, {"gpu-a": _judged()}), 100.0)
    assert list(advice) == [("gpu-a", "queue_empty")]
    (a,) = advice.values()
    assert (a.state, a.since, a.evidence, a.action.text) == (
        "pending", 100.0, FINDING.evidence, "client: faster",
    )  # fmt: skip
    assert (a.summary, a.source, a.labels) == (RULE.summary, RULE.source, {"cluster": "eu-1"})


def test_target_status_shows_the_last_scrape_config_and_judged_samples():
    status = target_status(_target(), _judged())
    assert (status.up, status.last_scrape_ts, status.scrapes_total) == (True, 100.0, 1)
    assert (status.sglang_version, status.samples_in_window) == ("0.5.23", 12)
    assert status.signals == {"num_queue_reqs": 0.0}
    assert target_status(_target(), None).samples_in_window == 0


def test_rule_results_carry_the_one_alert_state():
    tracker = AlertTracker(hold_for=0.0, keep_firing_for=0.0)
    advice = active_advice(reviewed({"gpu-a": _target()}, {"gpu-a": _judged()}), 100.0)
    tracker.update(advice, 100.0)
    results = {r.rule: r for r in rule_results("gpu-a", _judged(), tracker)}
    assert (results["queue_empty"].state, results["queue_empty"].fired_at) == ("firing", 100.0)
    assert results["queue_too_long"].state == "inactive"
    assert results["queue_too_long"].health is Health.NO_DATA
    assert rule_results("gpu-a", None, tracker) == ()


def test_build_evaluation_lists_advice_of_watched_targets_only():
    tracker = AlertTracker(hold_for=60.0, keep_firing_for=0.0)
    targets = {"gpu-a": _target(), "gpu-b": _target("gpu-b")}
    judged = {"gpu-a": _judged(), "gpu-b": _judged()}
    tracker.update(active_advice(reviewed(targets, judged), 100.0), 100.0)
    del targets["gpu-b"]
    ev = build_evaluation(
        reviewed(targets, judged), tracker, rule_failures={"queue_empty": 2},
        alertmanager=AlertmanagerStatus(), count=7, now=110.0,
    )  # fmt: skip
    assert [(a.target, a.rule, a.state) for a in ev.advice] == [("gpu-a", "queue_empty", "pending")]
    assert set(ev.targets) == set(ev.results) == {"gpu-a"}
    assert (ev.ts, ev.evaluations_total, ev.rule_evaluation_failures) == (
        110.0,
        7,
        {"queue_empty": 2},
    )


def test_rule_results_are_rebuilt_only_for_a_new_judgement_or_a_target_with_alerts():
    from sglang_tuner.publish import ResultsMemo, all_rule_results

    tracker, memo = AlertTracker(hold_for=0.0, keep_firing_for=0.0), ResultsMemo()
    targets = {"gpu-a": _target(), "gpu-b": _target("gpu-b"), "gone": _target("gone")}
    quiet = TargetJudgement(100.0, True, 12, _judged().judgements[1:])  # no finding
    judged = {"gpu-a": quiet, "gpu-b": quiet, "gone": quiet}
    first = all_rule_results(reviewed(targets, judged), tracker, memo)
    del targets["gone"]
    second = all_rule_results(reviewed(targets, judged), tracker, memo)
    assert second["gpu-a"] is first["gpu-a"] and set(memo) == {"gpu-a", "gpu-b"}
    judged["gpu-b"] = _judged(105.0)  # judged again: its finding fires
    tracker.update(active_advice(reviewed(targets, judged), 105.0), 105.0)
    third = all_rule_results(reviewed(targets, judged), tracker, memo)
    assert third["gpu-a"] is first["gpu-a"] and "gpu-b" not in memo
    assert {r.rule: r.state for r in third["gpu-b"]}["queue_empty"] == "firing"
    assert all_rule_results(reviewed(targets, judged), tracker, memo)["gpu-b"] is not third["gpu-b"]
