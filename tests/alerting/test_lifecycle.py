"""Alert lifecycle tables in the style of Prometheus's `TestKeepFiringFor`: time starts at 0."""

from dataclasses import replace

import pytest
from sglang_tuner.alerting.alertmanager import rfc3339, to_alertmanager_json
from sglang_tuner.alerting.lifecycle import (
    RESOLVED_RETENTION_SECONDS,
    Alert,
    AlertState,
    AlertTracker,
    needs_sending,
    valid_until,
)
from sglang_tuner.alerting.texts import alert_name
from sglang_tuner.model.advice import Action, Advice, Confidence, Severity

INTERVAL = 10.0
RESEND = 60.0
KEY = ("gpu-a", "scheduler_too_conservative")
PEND, FIRE, INACT = AlertState.PENDING, AlertState.FIRING, AlertState.INACTIVE
GONE = None  # the tracker no longer holds the alert

Row = tuple[float, bool, AlertState | None, bool]  # (now, condition true, state, sent this tick)


def make_advice(target: str = "gpu-a", rule: str = "scheduler_too_conservative") -> Advice:
    """A firing-shaped piece of advice as the loop builds it."""
    return Advice(
        target=target,
        rule=rule,
        severity=Severity.WARNING,
        state="firing",
        since=0.0,
        summary="Token usage stays below 0.9 while requests wait.",
        evidence="condition held in 83% of 60 samples over 5m; token_usage p50 0.41",
        action=Action("--schedule-conservativeness 1 -> 0.3", "--schedule-conservativeness"),
        source="Hyperparameter Tuning / Achieve a high token usage",
        confidence=Confidence.HIGH,
        labels={"cluster": "eu-1", "rule": "must-not-win"},
    )


def run_table(tracker: AlertTracker, table: list[Row]) -> None:
    """Evaluate every INTERVAL from 0; a row sets the condition from its time on and is checked."""
    rows = {row[0]: row for row in table}
    condition = False
    now = 0.0
    while now <= table[-1][0]:
        if now in rows:
            condition = rows[now][1]
        tracker.update({KEY: make_advice()} if condition else {}, now)
        due = tracker.alerts_to_send(now, RESEND, INTERVAL)
        if now in rows:
            tracked = {a.key: a.state for a in tracker.alerts()}
            got = (now, tracked.get(KEY), bool(due))
            assert got == (now, rows[now][2], rows[now][3])
        now += INTERVAL


def test_alert_tracker_fires_after_hold_resends_and_keeps_resolve_for_retention() -> None:
    run_table(
        AlertTracker(hold_for=30.0, keep_firing_for=0.0),
        [
            (0, True, PEND, False),  # pending is never sent
            (10, True, PEND, False),
            (20, True, PEND, False),
            (30, True, FIRE, True),  # held for 30 s: fires and is sent at once
            (40, True, FIRE, False),
            (90, True, FIRE, False),  # 30 + 60 is not < 90
            (100, True, FIRE, True),  # resend delay passed
            (110, False, INACT, True),  # resolved: sent immediately
            (120, False, INACT, False),
            (180, False, INACT, True),  # the resolve is re-sent every resend delay
            (1010, False, INACT, False),  # 900 s after resolving: still kept
            (1020, False, GONE, False),  # retention over: dropped, not sent
        ],
    )


def test_alert_tracker_keeps_firing_for_after_condition_clears() -> None:
    run_table(
        AlertTracker(hold_for=0.0, keep_firing_for=30.0),
        [
            (0, True, FIRE, True),  # hold 0 fires on the first evaluation
            (10, False, FIRE, False),  # keep firing since 10
            (20, True, FIRE, False),  # condition back: the keep-firing clock resets
            (30, False, FIRE, False),  # keep firing since 30
            (50, False, FIRE, False),
            (60, False, INACT, True),  # 60 - 30 = keep_firing_for: resolved
            (70, True, FIRE, True),  # a new instance (hold 0): sent as new
        ],
    )


def test_alert_tracker_deletes_pending_that_clears_without_sending() -> None:
    tracker = AlertTracker(hold_for=30.0, keep_firing_for=300.0)
    run_table(
        tracker,
        [
            (0, True, PEND, False),
            (10, True, PEND, False),
            (20, False, GONE, False),  # pending never resolves, never keeps firing
            (30, True, PEND, False),  # starts over
            (50, True, PEND, False),
            (60, True, FIRE, True),  # 30 s after the new active_at
        ],
    )
    assert tracker.state_of(KEY) == (FIRE, 30.0, 60.0)


def test_alert_tracker_state_of_unknown_and_resolved_is_inactive() -> None:
    tracker = AlertTracker(hold_for=0.0, keep_firing_for=0.0)
    assert tracker.state_of(KEY) == (INACT, None, None)
    tracker.update({KEY: make_advice()}, 0.0)
    tracker.update({}, 10.0)
    assert tracker.state_of(KEY) == (INACT, None, None)
    assert [a.resolved_at for a in tracker.alerts()] == [10.0]


def test_alert_tracker_hold_for_per_rule() -> None:
    holds = {"scheduler_too_conservative": 20.0, "queue_empty": 0.0}
    tracker = AlertTracker(hold_for=holds.__getitem__, keep_firing_for=0.0)
    other = ("gpu-a", "queue_empty")
    active = {KEY: make_advice(), other: make_advice(rule="queue_empty")}
    tracker.update(active, 0.0)
    assert (tracker.state_of(KEY)[0], tracker.state_of(other)[0]) == (PEND, FIRE)
    tracker.update(active, 20.0)
    assert tracker.state_of(KEY) == (FIRE, 0.0, 20.0)


def test_alert_tracker_sent_alert_is_due_again_only_after_the_resend_delay() -> None:
    tracker = AlertTracker(hold_for=0.0, keep_firing_for=0.0)
    tracker.update({KEY: make_advice()}, 0.0)
    assert len(tracker.alerts_to_send(0.0, RESEND, INTERVAL)) == 1  # handed to the notifier
    tracker.update({KEY: make_advice()}, 10.0)
    assert tracker.alerts_to_send(10.0, RESEND, INTERVAL) == []
    tracker.update({KEY: make_advice()}, 61.0)
    assert len(tracker.alerts_to_send(61.0, RESEND, INTERVAL)) == 1


def test_alert_tracker_resolve_is_sent_once_after_firing() -> None:
    tracker = AlertTracker(hold_for=0.0, keep_firing_for=0.0)
    tracker.update({KEY: make_advice()}, 0.0)
    tracker.alerts_to_send(0.0, RESEND, INTERVAL)
    tracker.update({}, 10.0)
    due = tracker.alerts_to_send(10.0, RESEND, INTERVAL)
    assert [(a.state, a.resolved_at) for a in due] == [(INACT, 10.0)]
    tracker.update({}, 20.0)
    assert tracker.alerts_to_send(20.0, RESEND, INTERVAL) == []


def test_alert_tracker_update_returns_each_state_change_once() -> None:
    tracker = AlertTracker(hold_for=10.0, keep_firing_for=0.0)
    changes = tracker.update({KEY: make_advice()}, 0.0)
    assert [(c.key, c.shown) for c in changes] == [(KEY, "pending")]
    assert tracker.update({KEY: make_advice()}, 5.0) == []
    assert [c.shown for c in tracker.update({KEY: make_advice()}, 10.0)] == ["firing"]
    (resolved,) = tracker.update({}, 20.0)
    assert resolved.shown == "resolved"
    assert resolved.history_row(20.0)[:5] == (
        20.0, "gpu-a", "scheduler_too_conservative", "resolved",
        "--schedule-conservativeness 1 -> 0.3",
    )  # fmt: skip


def test_alert_tracker_pending_that_clears_is_dropped_as_inactive() -> None:
    tracker = AlertTracker(hold_for=30.0, keep_firing_for=0.0)
    tracker.update({KEY: make_advice()}, 0.0)
    (dropped,) = tracker.update({}, 10.0)
    assert (dropped.old, dropped.new, dropped.shown) == (PEND, INACT, "inactive")
    assert tracker.alerts() == []


def test_alert_tracker_advice_carries_alert_state_and_since() -> None:
    tracker = AlertTracker(hold_for=10.0, keep_firing_for=0.0)
    tracker.update({KEY: make_advice()}, 0.0)
    tracker.update({KEY: make_advice()}, 10.0)
    (advice,) = tracker.advice()
    assert (advice.state, advice.since) == ("firing", 0.0)


@pytest.mark.parametrize(
    ("interval", "resend", "ends"), [(10.0, 60.0, 30.0 + 240.0), (100.0, 60.0, 30.0 + 400.0)]
)
def test_alerts_to_send_valid_until_is_four_times_max_interval_resend(
    interval: float, resend: float, ends: float
) -> None:
    tracker = AlertTracker(hold_for=0.0, keep_firing_for=0.0)
    tracker.update({KEY: make_advice()}, 30.0)
    (alert,) = tracker.alerts_to_send(30.0, resend, interval)
    assert alert.valid_until == ends == valid_until(30.0, interval, resend)
    assert to_alertmanager_json([alert])[0]["endsAt"] == rfc3339(ends)


def test_needs_sending_matches_prometheus() -> None:
    advice = make_advice()
    alert = Alert(KEY, advice, {}, {}, FIRE, active_at=0.0, fired_at=0.0)
    assert needs_sending(alert, 0.0, RESEND)  # never sent
    assert not needs_sending(Alert(KEY, advice, {}, {}, PEND, active_at=0.0), 100.0, RESEND)
    sent = Alert(KEY, advice, {}, {}, FIRE, active_at=0.0, fired_at=0.0, last_sent_at=0.0)
    assert not needs_sending(sent, 60.0, RESEND)  # strictly after the delay
    assert needs_sending(sent, 61.0, RESEND)
    resolved = Alert(KEY, advice, {}, {}, INACT, 0.0, 0.0, resolved_at=5.0, last_sent_at=0.0)
    assert needs_sending(resolved, 6.0, RESEND)


def test_alert_name_is_sglang_camel_case() -> None:
    assert alert_name("scheduler_too_conservative") == "SGLangSchedulerTooConservative"
    assert alert_name("queue_empty") == "SGLangQueueEmpty"
    assert alert_name("cuda_graph_bs_2x") == "SGLangCudaGraphBs2x"


def test_alert_tracker_labels_and_annotations_from_advice() -> None:
    tracker = AlertTracker(hold_for=0.0, keep_firing_for=0.0)
    tracker.update({KEY: make_advice()}, 0.0)
    (alert,) = tracker.alerts()
    assert alert.labels == {
        "alertname": "SGLangSchedulerTooConservative",
        "target": "gpu-a",
        "rule": "scheduler_too_conservative",  # ours win over the target's extra labels
        "severity": "warning",
        "cluster": "eu-1",
    }
    assert alert.annotations == {  # what the shipped Prometheus rules build as well
        "summary": "Token usage stays below 0.9 while requests wait.",
        "description": "sglang-tuner advises for gpu-a: --schedule-conservativeness 1 -> 0.3. "
        "Evidence and plan: http://localhost:9877/advice/gpu-a",
        "action": "--schedule-conservativeness 1 -> 0.3",
        "source": "Hyperparameter Tuning / Achieve a high token usage",
        "confidence": "high",
        "runbook_url": "http://localhost:9877/runbook/scheduler_too_conservative",
    }
    assert "generatorURL" not in to_alertmanager_json([alert])[0]  # no external_url given


def test_to_alertmanager_json_shape_firing_and_resolved() -> None:
    tracker = AlertTracker(hold_for=10.0, keep_firing_for=0.0, external_url="http://node:9877/")
    now = 1_795_341_600.0  # 2026-11-22T10:00:00Z
    tracker.update({KEY: make_advice()}, now)
    assert to_alertmanager_json(tracker.alerts_to_send(now, RESEND, INTERVAL)) == []  # pending
    tracker.update({KEY: make_advice()}, now + 10)
    (firing,) = to_alertmanager_json(tracker.alerts_to_send(now + 10, RESEND, INTERVAL))
    assert firing["startsAt"] == "2026-11-22T10:00:10.000Z"  # Prometheus: FiredAt
    assert firing["endsAt"] == "2026-11-22T10:04:10.000Z"
    assert firing["generatorURL"] == "http://node:9877/advice/gpu-a"
    assert set(firing) == {"labels", "annotations", "startsAt", "endsAt", "generatorURL"}
    tracker.update({}, now + 20)
    (resolved,) = to_alertmanager_json(tracker.alerts_to_send(now + 20, RESEND, INTERVAL))
    assert resolved["endsAt"] == "2026-11-22T10:00:20.000Z"
    assert resolved["labels"] == firing["labels"]


def test_alert_tracker_forget_target_returns_resolves_of_sent_alerts() -> None:
    tracker = AlertTracker(
        hold_for=lambda rule: 0.0 if rule == KEY[1] else 60.0, keep_firing_for=0.0
    )
    pending_key = ("gpu-a", "queue_empty")
    other_target = ("gpu-b", KEY[1])
    active = {
        KEY: make_advice(),
        pending_key: make_advice(rule="queue_empty"),
        other_target: make_advice(target="gpu-b"),
    }
    tracker.update(active, 0.0)
    (resolve,) = tracker.forget_target("gpu-a", 5.0)  # the pending one was never sent
    assert (resolve.key, resolve.state, resolve.resolved_at) == (KEY, INACT, 5.0)
    assert [a.key for a in tracker.alerts()] == [other_target]
    assert to_alertmanager_json([resolve])[0]["endsAt"] == rfc3339(5.0)


def test_resolved_retention_is_prometheus_fifteen_minutes() -> None:
    assert RESOLVED_RETENTION_SECONDS == 15 * 60


def test_a_changed_severity_resolves_the_old_label_set_once_and_goes_on_under_the_new() -> None:
    """Severity is an identity label in Alertmanager: a finding graded anew (a warning, then a
    hint once the log gives the load) must not leave the warning there beside the hint, and a
    grade wavering between evaluations must not flap it."""
    tracker = AlertTracker(hold_for=0.0, keep_firing_for=0.0)
    warning, info = make_advice(), replace(make_advice(), severity=Severity.INFO)
    tracker.update({KEY: warning}, 0.0)
    [sent] = tracker.alerts_to_send(0.0, RESEND, INTERVAL)
    assert sent.labels["severity"] == "warning" and sent.state is FIRE
    for now in (10.0, 11.0, 12.0, 13.0):  # graded anew, not yet for long enough
        tracker.update({KEY: info if now != 12.0 else warning}, now)
    assert tracker.alerts_to_send(13.0, RESEND, INTERVAL) == []
    assert tracker.severity_of(KEY) is Severity.WARNING
    for now in (14.0, 15.0, 16.0):
        tracker.update({KEY: info}, now)
        assert tracker.severity_of(KEY) is Severity.WARNING
    tracker.update({KEY: info}, 18.0)  # the fifth in a row (13 to 18)
    resolved, current = tracker.alerts_to_send(18.0, RESEND, INTERVAL)
    assert (resolved.labels["severity"], resolved.state, resolved.resolved_at) == (
        "warning",
        INACT,
        18.0,
    )
    assert (current.labels["severity"], current.state, current.fired_at) == ("info", FIRE, 0.0)
    body = to_alertmanager_json([resolved, current])
    assert body[0]["endsAt"] == rfc3339(18.0) and body[1]["labels"]["severity"] == "info"
    tracker.update({KEY: info}, 20.0)
    assert tracker.alerts_to_send(20.0, RESEND, INTERVAL) == []  # the resolve went once
    assert [a.labels["severity"] for a in tracker.alerts()] == ["info"]
