"""Outputs: alert state, publication, Alertmanager and SQLite after judging."""

import logging
import sqlite3
import time

from sglang_tuner.config.loading import load_settings
from sglang_tuner.evaluation import TunerState
from sglang_tuner.judge import Judgement, TargetJudgement
from sglang_tuner.loop.outputs import Outputs
from sglang_tuner.model.advice import Action, Confidence, Finding, Health, Pass, Severity
from sglang_tuner.model.scrape import ScrapeResult, Snapshot
from sglang_tuner.model.target_spec import TargetSpec
from sglang_tuner.rule import Rule
from sglang_tuner.store.database import Store
from sglang_tuner.target_state import TargetState

from tests.alertmanager_process import am_alerts, eventually, needs_alertmanager
from tests.helpers import reviewed

RULE = Rule(
    id="queue_empty", severity=Severity.INFO, summary="Queue is empty.", action="Submit faster.",
    source="Hyperparameter Tuning", check=lambda _i: Pass(),
)  # fmt: skip
KEY = ("gpu-a", "queue_empty")
FINDING = Finding("queue 0 in 90% of samples", Action("client: faster"), Confidence.HIGH, 0.9)


def _targets(*names: str) -> dict[str, TargetState]:
    out = {}
    for name in names:
        target = TargetState(TargetSpec(name, f"http://{name}:30000"), 10)
        target.ingest(ScrapeResult(name, 100.0, 0.02, Snapshot(name, 100.0, {"q": 1.0})))
        out[name] = target
    return out


def _judged(*names: str, holds: bool = True) -> dict[str, TargetJudgement]:
    outcome = FINDING if holds else Pass(0.0, 10)
    judgement = TargetJudgement(
        100.0, True, 10, (Judgement(RULE, Health.OK, RULE.severity, outcome),)
    )
    return dict.fromkeys(names, judgement)


def test_outputs_publish_logs_and_records_each_advice_change(caplog):
    caplog.set_level(logging.INFO, logger="sglang_tuner.loop.outputs")
    state = TunerState()
    settings = load_settings(None, {"hold_for_seconds": 10, "keep_firing_for_seconds": 0})
    outputs = Outputs(settings, state, None)
    targets = _targets("gpu-a")
    outputs.publish(reviewed(targets, _judged("gpu-a")), {}, 100.0)
    assert state.latest().advice[0].state == "pending"
    outputs.publish(reviewed(targets, _judged("gpu-a")), {}, 110.0)
    assert state.latest().advice[0].state == "firing"
    outputs.publish(reviewed(targets, _judged("gpu-a", holds=False)), {}, 120.0)
    assert state.latest().advice == ()
    assert [row[3] for row in outputs.history] == ["pending", "firing", "resolved"]
    assert "advice resolved for gpu-a: queue_empty client: faster" in caplog.text
    assert state.latest().evaluations_total == 3


def test_outputs_persist_and_restore_windows_and_alerts(tmp_path):
    settings = load_settings(None, {"hold_for_seconds": 0})
    store = Store(tmp_path / "tuner.db")
    outputs = Outputs(settings, TunerState(), store)
    targets = _targets("gpu-a")
    outputs.publish(reviewed(targets, _judged("gpu-a")), {}, 100.0)
    outputs.persist(reviewed(targets), 100.0)
    assert outputs.history == []  # stored

    fresh = Outputs(settings, TunerState(), Store(tmp_path / "tuner.db"))
    restored = {"gpu-a": TargetState(TargetSpec("gpu-a", "http://gpu-a:30000"), 10)}
    fresh.restore(restored, 160.0)
    assert restored["gpu-a"].window.view(160.0, 600.0).values("q") == [1.0]
    assert fresh.tracker.state_of(("gpu-a", "queue_empty"))[0] == "firing"


def test_a_full_database_keeps_history_in_memory_and_reports_degraded(tmp_path):
    settings = load_settings(None, {"hold_for_seconds": 0})
    store = Store(tmp_path / "tuner.db")
    outputs = Outputs(settings, TunerState(), store)
    targets = _targets("gpu-a")
    outputs.persist(reviewed(targets), 99.0)
    pages = store._read().execute("PRAGMA page_count").fetchone()[0]
    store._read().execute(f"PRAGMA max_page_count = {pages}")  # SQLite's own "disk is full"
    big = TargetState(TargetSpec("gpu-b", "http://gpu-b:30000"), 2000)
    values = {f"signal_{i}": float(i) for i in range(20)}
    for k in range(2000):
        big.ingest(ScrapeResult("gpu-b", k, 0.01, Snapshot("gpu-b", k, values)))
    outputs.publish(reviewed(targets, _judged("gpu-a")), {}, 100.0)
    outputs.persist(reviewed({**targets, "gpu-b": big}), 100.0)
    assert len(outputs.history) == 1  # the advice transition waits for the next save
    database = outputs.publish(reviewed(targets, _judged("gpu-a")), {}, 101.0).database
    assert database.configured and database.save_failures_total == 1
    assert database.error is not None and "full" in database.error
    store._read().execute("PRAGMA max_page_count = 1000000")  # room again
    outputs.persist(reviewed({**targets, "gpu-b": big}), 102.0)
    assert outputs.history == [] and store.error is None
    assert len(Store(tmp_path / "tuner.db").history("gpu-a")) == 1


def test_restored_alerts_are_sent_again_at_once(tmp_path):
    settings = load_settings(None, {"hold_for_seconds": 0})
    outputs = Outputs(settings, TunerState(), Store(tmp_path / "tuner.db"))
    targets = _targets("gpu-a")
    outputs.publish(reviewed(targets, _judged("gpu-a")), {}, 100.0)
    assert outputs.tracker.alerts_to_send(100.0, 60.0, 5.0)  # queued, then the process died
    outputs.persist(reviewed(targets), 100.0)
    fresh = Outputs(settings, TunerState(), Store(tmp_path / "tuner.db"))
    fresh.restore({"gpu-a": TargetState(TargetSpec("gpu-a", "http://gpu-a:30000"), 10)}, 101.0)
    assert [a.key for a in fresh.tracker.alerts_to_send(101.0, 60.0, 5.0)] == [KEY]


@needs_alertmanager
async def test_outputs_forget_resolves_a_removed_targets_alerts_in_alertmanager(alertmanager):
    settings = load_settings(
        None, {"hold_for_seconds": 0, "alertmanager": {"urls": [alertmanager.url]}}
    )
    outputs = Outputs(settings, TunerState(), None)
    await outputs.start()
    try:
        targets = _targets("gpu-a", "gpu-b")
        now = time.time()  # Alertmanager compares endsAt with its own clock
        outputs.publish(reviewed(targets, _judged("gpu-a", "gpu-b")), {}, now)

        async def both_active() -> bool:
            return all([await am_alerts(alertmanager.url, t) for t in ("gpu-a", "gpu-b")])

        await eventually(both_active)
        # Alertmanager keeps a resolve whose endsAt is still ahead of its clock as active.
        outputs.forget("gpu-a", time.time())
        del targets["gpu-a"]

        async def only_b_active() -> bool:
            gone = await am_alerts(alertmanager.url, "gpu-a") == []
            return gone and len(await am_alerts(alertmanager.url, "gpu-b")) == 1

        await eventually(only_b_active)
        assert [a.target for a in outputs.tracker.advice()] == ["gpu-b"]
    finally:
        await outputs.stop()


def test_a_save_stuck_on_a_locked_file_never_holds_the_caller_and_keeps_the_history(tmp_path):
    settings = load_settings(
        None,
        {"hold_for_seconds": 0, "scrape_interval_seconds": 0.05, "scrape_timeout_seconds": 0.04},
    )
    store = Store(tmp_path / "tuner.db")
    outputs = Outputs(settings, TunerState(), store)
    targets = _targets("gpu-a")
    outputs.publish(reviewed(targets, _judged("gpu-a")), {}, 100.0)
    lock = sqlite3.connect(tmp_path / "tuner.db", isolation_level=None, check_same_thread=False)
    lock.execute("BEGIN EXCLUSIVE")  # another process holding the file
    outputs.persist(reviewed(targets), 100.0, wait=False)  # returns at once
    time.sleep(0.3)  # past two scrape intervals
    outputs.persist(reviewed(targets), 100.05, wait=False)  # due while it runs: skipped
    database = outputs.publish(reviewed(targets, _judged("gpu-a")), {}, 100.1).database
    assert database.saves_skipped_total == 1 and database.save_failures_total == 0
    assert database.error is not None and "a save of the state database has run" in database.error
    assert len(outputs.history) == 1  # kept until its save ends
    lock.execute("ROLLBACK")
    outputs.persist(reviewed(targets), 100.2)  # waits for the stuck one, then saves
    assert (
        outputs.history == []
        and outputs.publish(reviewed(targets), {}, 100.3).database.error is None
    )
    assert len(Store(tmp_path / "tuner.db").history("gpu-a")) == 1
