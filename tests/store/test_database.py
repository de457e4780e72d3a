"""SQLite persistence: windows survive a restart; alert state and advice history are kept."""

from sglang_tuner.alerting.lifecycle import AlertTracker
from sglang_tuner.model.advice import Action, Advice, Confidence, Severity
from sglang_tuner.model.flags import FlagHistory, FlagOutcome
from sglang_tuner.model.scrape import Snapshot
from sglang_tuner.model.window import Window
from sglang_tuner.store.database import Store

KEY = ("gpu-a", "queue_empty")


def _window(*samples: tuple[float, dict[str, float]]) -> Window:
    window = Window(100)
    for ts, values in samples:
        window.append(Snapshot("t", ts, values))
    return window


def test_store_restores_window_samples_after_restart(tmp_path):
    db = tmp_path / "state" / "tuner.db"
    window = _window(*[(100.0 + k, {"num_queue_reqs": float(k)}) for k in range(15)])
    history = [(110.0, "gpu-a", "queue_empty", "firing", "client: submit faster", "ev")]
    store = Store(db)
    store.save({"gpu-a": window.view(115.0, float("inf"))}, [], history, now=115.0)
    store.close()

    reopened = Store(db)
    (restored,) = reopened.load_windows({"gpu-a": 10}, now=200.0).values()
    assert [s.values["num_queue_reqs"] for s in restored] == [float(k) for k in range(5, 15)]
    assert [s.ts for s in restored] == [105.0 + k for k in range(10)]  # oldest first
    assert reopened.history("gpu-a")[0][1:4] == ("gpu-a", "queue_empty", "firing")


def test_store_load_windows_ignores_other_targets_and_future_samples(tmp_path):
    store = Store(tmp_path / "t.db")
    window = _window((50.0, {"x": 1.0}), (500.0, {"x": 2.0}))
    store.save({"b": window.view(500.0, float("inf"))}, [], [], now=500.0)
    loaded = store.load_windows({"a": 10, "b": 10}, now=100.0)
    assert loaded["a"] == []
    assert [s.values for s in loaded["b"]] == [{"x": 1.0}]


def _firing_tracker() -> AlertTracker:
    tracker = AlertTracker(hold_for=60.0, keep_firing_for=0.0)
    advice = Advice(
        "gpu-a", "queue_empty", Severity.INFO, "pending", 0.0, "s", "e",
        Action("client: submit faster"), "src", Confidence.HIGH,
    )  # fmt: skip
    tracker.update({KEY: advice}, now=100.0)
    tracker.update({KEY: advice}, now=200.0)
    return tracker


def test_store_restores_firing_alerts_with_their_advice_after_a_short_outage(tmp_path):
    tracker = _firing_tracker()
    assert tracker.state_of(KEY)[0] == "firing"
    store = Store(tmp_path / "t.db")
    store.save({}, tracker.alerts(), [], now=200.0)

    fresh = AlertTracker(hold_for=60.0, keep_firing_for=0.0)
    fresh.restore(store.load_alerts({"gpu-a"}, now=200.0 + 1800))
    assert fresh.state_of(KEY) == ("firing", 100.0, 200.0)
    (advice,) = fresh.advice()
    assert (advice.action.text, advice.severity, advice.confidence) == (
        "client: submit faster", Severity.INFO, Confidence.HIGH,
    )  # fmt: skip

    assert store.load_alerts({"gpu-a"}, now=200.0 + 3601) == []  # past the outage tolerance
    assert store.load_alerts({"gpu-b"}, now=200.0 + 1800) == []  # a target no longer watched


def test_store_keeps_each_targets_flag_history(tmp_path):
    crashed = FlagOutcome(8192, 50.0, "prefill_oom_events")
    history = FlagHistory(safe={"chunked_prefill_size": FlagOutcome(4096, 40.0)},
                          failing={"chunked_prefill_size": crashed})  # fmt: skip
    store = Store(tmp_path / "t.db")
    store.save({}, [], [], now=60.0, flags={"gpu-a": history, "gpu-b": FlagHistory()})
    loaded = Store(tmp_path / "t.db").load_flag_histories({"gpu-a"})
    assert loaded == {"gpu-a": history}


def test_store_keeps_changes_and_their_verdicts_across_restarts(tmp_path):
    from sglang_tuner.changes.record import Change, ChangeLog
    from sglang_tuner.changes.verdict import MetricVerdict, SignalSummary, Verdict, WindowSummary

    window = WindowSummary(
        0.0, 295.0, {"gen_throughput": SignalSummary(60, 4000.0, 4000.0, 4100.0, 4200.0)},
        {"gen_throughput": (4000.0,) * 60},
    )  # fmt: skip
    metric = MetricVerdict("gen_throughput", "hurt", 0.9, 0.85, 0.95, 4000.0, 3600.0)
    change = Change(
        target="gpu-a", at=330.0, kind="flags", before={"--mem-fraction-static": "0.85"},
        after={"--mem-fraction-static": "0.9"}, rule="mem_fraction_too_low", profile="offline",
        before_window=window, due=690.0, after_window=window,
        verdict=Verdict("hurt", "worse: gen_throughput", (metric,)), asked_ratio=None,
    )  # fmt: skip
    store = Store(tmp_path / "t.db")
    store.save({}, [], [], now=700.0, changes={"gpu-a": [change]})
    (loaded,) = Store(tmp_path / "t.db").load_changes({"gpu-a"})["gpu-a"]
    assert loaded == change
    log = ChangeLog("gpu-a", "offline", 300.0, 60.0)
    log.restore([loaded])
    assert log.verdicts == {"hurt": 1}


def _count(store: Store, table: str) -> int:
    return int(store._read().execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


def test_save_writes_only_new_samples_and_forgets_old_ones_each_minute(tmp_path):
    store = Store(tmp_path / "t.db")
    window = Window(5)
    for ts in range(3):
        window.append(Snapshot("t", float(ts), {"x": float(ts)}))
    store.save({"a": window.view(2.0, float("inf"))}, [], [], now=2.0)
    for ts in range(3, 8):
        window.append(Snapshot("t", float(ts), {"x": float(ts)}))
    assert store.prune_due(7.0) is False and store.saved_until("a") == 2.0
    store.save({"a": window.view(7.0, 7.0 - store.saved_until("a"))}, [], [], now=7.0)
    assert _count(store, "samples") == 8  # only the five new ones inserted, none twice
    (restored,) = Store(tmp_path / "t.db").load_windows({"a": 5}, now=10.0).values()
    assert [s.ts for s in restored] == [3.0, 4.0, 5.0, 6.0, 7.0]
    assert store.prune_due(62.0)  # a minute on: the whole window, and the old ones go
    store.save({"a": window.view(62.0, float("inf"))}, [], [], now=62.0)
    assert _count(store, "samples") == 5
    store.save({}, [], [], now=63.0)  # the target left the config
    assert _count(store, "samples") == 0


def test_the_database_is_in_wal_mode(tmp_path):
    store = Store(tmp_path / "t.db")
    assert store._read().execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_file_that_is_not_a_database_is_moved_aside_and_a_fresh_one_started(tmp_path, caplog):
    db = tmp_path / "tuner.db"
    db.write_bytes(b"this is not sqlite" * 100)
    store = Store(db)
    assert store.writable and store.error is None
    aside = tmp_path / "tuner.db.corrupt-1"
    assert aside.read_bytes().startswith(b"this is not sqlite")  # kept, for a look
    assert str(aside) in caplog.text
    assert store.save({"a": _window((1.0, {"x": 1.0})).view(1.0, 10.0)}, [], [], now=1.0)


def test_a_truncated_database_is_moved_aside(tmp_path):
    db = tmp_path / "tuner.db"
    store = Store(db)
    window = _window(*[(float(k), {"x": float(k)}) for k in range(100)])
    store.save({"a": window.view(100.0, float("inf"))}, [], [], now=100.0)
    store.close()
    (tmp_path / "tuner.db-wal").unlink(missing_ok=True)
    db.write_bytes(db.read_bytes()[: db.stat().st_size // 2])
    fresh = Store(db)
    assert fresh.load_windows({"a": 100}, now=200.0) == {"a": []}
    assert (tmp_path / "tuner.db.corrupt-1").exists()


def test_an_unwritable_path_keeps_state_in_memory_and_says_why(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the directory should be")
    store = Store(blocker / "tuner.db")
    assert not store.writable and "cannot open" in (store.error or "")
    assert store.load_windows({"a": 10}, now=1.0) == {"a": []}  # reads answer empty
    assert not store.save({}, [], [], now=1.0)
    blocker.unlink()  # the path becomes writable: the next save opens it
    assert store.save({}, [], [], now=2.0) and store.error is None


def test_store_notices_its_file_replaced_and_rebuilds_it(tmp_path):
    import shutil

    from sglang_tuner.store.database import Store

    path = tmp_path / "tuner.db"
    store = Store(path)
    assert store.check_file() is False  # the file it opened
    other = tmp_path / "other.db"
    Store(other).close()
    shutil.move(other, path)  # another file in its place (a restore from an old backup)
    assert store.check_file() is True
    assert store.recreated_total == 1 and "replaced by another file" in (store.recreated or "")
    assert store.check_file() is False  # the rebuilt file is its own now
    path.unlink()
    assert store.check_file() is True and "was deleted" in (store.recreated or "")
    assert path.exists() and store.writable
