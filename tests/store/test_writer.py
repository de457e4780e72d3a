"""Saves in a thread of their own, against a real SQLite file locked by another connection: the
caller never waits, a save due while one runs is skipped and counted, a save running past its
limit is said, and once the lock goes the stuck save ends and nothing is lost."""

import sqlite3
import threading
from pathlib import Path

from sglang_tuner.model.scrape import Snapshot
from sglang_tuner.model.window import Window
from sglang_tuner.store.database import Store
from sglang_tuner.store.writer import SaveThread


def _window(*times: float) -> Window:
    window = Window(capacity=100)
    for ts in times:
        window.append(Snapshot("a", ts, {"x": ts}))
    return window


def test_a_save_stuck_on_a_lock_is_skipped_over_said_and_loses_nothing(tmp_path: Path) -> None:
    store, saver = Store(tmp_path / "t.db"), SaveThread()
    window = _window(1.0, 2.0)
    lock = sqlite3.connect(tmp_path / "t.db", isolation_level=None, check_same_thread=False)
    lock.execute("BEGIN EXCLUSIVE")  # another process holding the file
    views = {"a": window.view(2.0, float("inf"))}
    running = saver.submit(lambda: store.save(views, [], [], now=2.0))
    assert saver.busy and not saver.wait(0.3)  # the caller did not wait
    saver.skip()
    assert saver.skipped_total == 1
    slow = saver.slow(0.1)
    assert slow is not None and "1 save(s) skipped" in slow and "locked" in slow
    assert saver.slow(3600.0) is None
    threading.Timer(0.2, lambda: lock.execute("ROLLBACK")).start()
    assert saver.wait(10.0) and running.result() is True
    assert not saver.busy and saver.slow(0.0) is None
    saver.close()
    assert len(Store(tmp_path / "t.db").load_windows({"a": 10}, now=3.0)["a"]) == 2


def test_an_exception_in_a_save_reaches_whoever_reads_its_result() -> None:
    saver = SaveThread()

    def broken() -> bool:
        raise ValueError("a bug")

    future = saver.submit(broken)
    assert saver.wait(5.0)
    assert isinstance(future.exception(), ValueError)
    assert saver.submit(lambda: True).result(5.0) is True  # the thread goes on
    saver.close()
