"""Faults of the daemon's own process: killed twenty times while writing, stopped with SIGTERM,
and sent SIGHUP with a bad and then a good configuration. Real daemon processes, a real SQLite
file, simulated SGLang servers over real HTTP.
"""

import random
import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sglang_sim import ServerSpec, SimFleet

from tests.conftest import DaemonProcess

FAST = {
    "scrape_interval_seconds": 0.5,
    "scrape_timeout_seconds": 0.4,
    "evaluation_interval_seconds": 0.5,
    "window_seconds": 15.0,
    "min_samples": 6,
    "hold_for_seconds": 0.0,
}

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def servers() -> Iterator[SimFleet]:
    """Two busy simulated servers, steady already (their advice fires within seconds)."""
    specs = [ServerSpec("retraction_storm"), ServerSpec("healthy")]
    with SimFleet(specs, speed=10.0, warmup_seconds=300.0) as fleet:
        yield fleet


def _firing(daemon: DaemonProcess) -> dict[tuple[str, str], float]:
    """(target, rule) -> since_ts of every firing advice."""
    rows = daemon.get("/advice").json()["data"]
    return {(a["target"], a["rule"]): a["since_ts"] for a in rows if a["state"] == "firing"}


def _samples(daemon: DaemonProcess) -> dict[str, int]:
    return {t["name"]: t["samples_in_window"] for t in daemon.get("/targets").json()["data"]}


def test_twenty_sigkills_while_writing_leave_the_database_intact_and_alerts_firing(
    servers: SimFleet, tmp_path: Path
):
    config = {**FAST, "targets": [{"url": u} for u in servers.urls]}
    first = DaemonProcess(tmp_path, config).start()
    try:
        firing = first.wait_for(_firing, timeout=60)
    finally:
        first.stop()
    rng = random.Random(1)
    for _ in range(20):  # killed at a random moment: scrapes, judging and writes under way
        daemon = DaemonProcess(tmp_path, config)
        try:
            daemon.start()
            time.sleep(rng.uniform(0.0, 1.5))
        finally:
            assert daemon.proc is not None
            daemon.proc.send_signal(signal.SIGKILL)
            daemon.proc.wait(10)
    with sqlite3.connect(tmp_path / "tuner.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert not list(tmp_path.glob("*.corrupt*"))  # nothing was moved aside
    last = DaemonProcess(tmp_path, config).start()
    try:
        assert last.wait_for(lambda d: all(n > 0 for n in _samples(d).values()), timeout=5)
        back = last.wait_for(_firing, timeout=10)
    finally:
        last.stop()
    # the same alerts, firing since the same moment: restored, not raised afresh
    assert {k: back[k] for k in firing if k in back} == firing


def test_sigterm_keeps_the_windows_for_the_next_start(servers: SimFleet, tmp_path: Path):
    config = {**FAST, "targets": [{"url": u} for u in servers.urls]}
    daemon = DaemonProcess(tmp_path, config).start()
    try:
        daemon.wait_for(lambda d: min(_samples(d).values(), default=0) >= 10)
    finally:
        daemon.stop()
    assert daemon.proc is not None and daemon.proc.returncode == 0
    again = DaemonProcess(tmp_path, {**config, "scrape_interval_seconds": 60.0}).start()
    try:  # at most one scrape yet at a 60 s interval: the rest came from the file
        assert all(n >= 5 for n in _samples(again).values()), _samples(again)
    finally:
        again.stop()


def test_sighup_refuses_a_bad_config_keeps_running_then_applies_a_good_one(
    servers: SimFleet, tmp_path: Path
):
    one, two = servers.urls
    daemon = DaemonProcess(tmp_path, {**FAST, "targets": [{"url": one}]}).start()
    try:
        assert daemon.proc is not None
        daemon.wait_for(lambda d: d.get("/targets").json()["data"])
        daemon.config_path.write_text("targets: [{url: 'http://127.0.0.1:99999'}]\nbogus: 1\n")
        daemon.proc.send_signal(signal.SIGHUP)
        daemon.wait_for(lambda d: "reload failed, keeping the running configuration" in d.logs())
        assert daemon.get("/healthz").status_code == 200
        assert [t["url"] for t in daemon.get("/targets").json()["data"]] == [one]
        daemon.write_config({**daemon.config, "targets": [{"url": one}, {"url": two}]})
        daemon.proc.send_signal(signal.SIGHUP)
        urls = daemon.wait_for(
            lambda d: (
                sorted(t["url"] for t in d.get("/targets").json()["data"])
                if len(d.get("/targets").json()["data"]) == 2
                else None
            )
        )
        assert urls == sorted([one, two])
        log = daemon.logs()
        assert "99999" in log and "bogus" in log  # the refusal said what was wrong
    finally:
        daemon.stop()


def test_reload_by_http_refuses_a_bad_config_with_its_problems_then_applies_a_good_one(
    servers: SimFleet, tmp_path: Path
):
    """POST /-/reload, as the Prometheus Operator's config reloader sends it: 500 and the
    problems for a broken file (the running config kept, the reload metrics say so), 200 and
    the new targets for a good one."""
    one, two = servers.urls
    config = {**FAST, "targets": [{"url": one}], "web_enable_lifecycle": True}
    daemon = DaemonProcess(tmp_path, config).start()
    try:
        daemon.wait_for(lambda d: d.get("/targets").json()["data"])
        started = _metric(daemon, "sglang_tuner_config_last_reload_success_timestamp_seconds")
        assert _metric(daemon, "sglang_tuner_config_last_reload_successful") == 1.0
        assert started is not None and started > 0
        daemon.config_path.write_text("targets: [{url: 'http://127.0.0.1:99999'}]\nbogus: 1\n")
        refused = daemon.post("/-/reload")
        assert refused.status_code == 500
        assert "99999" in refused.json()["detail"] and "bogus" in refused.json()["detail"]
        assert _metric(daemon, "sglang_tuner_config_last_reload_successful") == 0.0
        assert _metric(daemon, "sglang_tuner_config_reload_failures_total") == 1.0
        assert [t["url"] for t in daemon.get("/targets").json()["data"]] == [one]
        daemon.write_config({**daemon.config, "targets": [{"url": one}, {"url": two}]})
        assert daemon.post("/-/reload").json() == {"status": "reloaded", "detail": None}
        urls = daemon.wait_for(  # published with the next evaluation
            lambda d: (
                sorted(t["url"] for t in d.get("/targets").json()["data"])
                if len(d.get("/targets").json()["data"]) == 2
                else None
            )
        )
        assert urls == sorted([one, two])
        assert _metric(daemon, "sglang_tuner_config_last_reload_successful") == 1.0
        after = _metric(daemon, "sglang_tuner_config_last_reload_success_timestamp_seconds")
        assert after is not None and after > started
    finally:
        daemon.stop()


def _metric(daemon: DaemonProcess, name: str) -> float | None:
    for line in daemon.get("/metrics").text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_a_database_deleted_while_running_is_noticed_and_rebuilt_from_memory(
    servers: SimFleet, tmp_path: Path
):
    config = {**FAST, "targets": [{"url": u} for u in servers.urls]}
    daemon = DaemonProcess(tmp_path, config).start()
    db = tmp_path / "tuner.db"
    try:
        daemon.wait_for(lambda d: min(_samples(d).values(), default=0) >= 6, timeout=30)
        daemon.wait_for(lambda _d: _history(db) > 0, timeout=60)  # the storm's advice stored
        for path in tmp_path.glob("tuner.db*"):
            path.unlink()  # a cleanup job, or log rotation gone wrong
        started = time.monotonic()
        daemon.wait_for(lambda d: (_metric(d, "sglang_tuner_database_recreated_total") or 0) >= 1)
        noticed = time.monotonic() - started
        ready = daemon.get("/readyz").json()
        writable = _metric(daemon, "sglang_tuner_database_writable")
        daemon.wait_for(lambda _d: db.exists() and _rows(db) > 0)
    finally:
        daemon.stop()
    assert noticed < 5.0  # at the next save: every scrape interval
    assert "was deleted while the daemon ran: rebuilt from memory" in ready["detail"]
    assert writable == 1.0
    assert daemon.logs().count("was deleted while the daemon ran") == 1  # logged once
    # the new file holds the windows kept in memory, not just the samples since, and the
    # advice transitions stored before the file went
    assert _rows(db) >= 2 * 6
    assert _history(db) > 0


def _history(db: Path) -> int:
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT count(*) FROM advice_history").fetchone()[0])


def _rows(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT count(*) FROM samples").fetchone()[0])


def _scrapes(daemon: DaemonProcess) -> int:
    return sum(t["scrapes_total"] for t in daemon.get("/targets").json()["data"])


def test_a_storm_of_sighups_is_a_reload_or_two_and_scrapes_go_on(servers: SimFleet, tmp_path):
    """Fifty SIGHUPs in about a second: each one that arrives while a reload waits to start is
    the same reload, so the loop applies the configuration a few times, not fifty."""
    config = {**FAST, "targets": [{"url": servers.urls[0]}]}
    daemon = DaemonProcess(tmp_path, config).start()
    try:
        assert daemon.proc is not None
        daemon.wait_for(lambda d: _scrapes(d) > 0)
        before = _scrapes(daemon)
        for _ in range(50):
            daemon.proc.send_signal(signal.SIGHUP)
            time.sleep(0.02)
        daemon.wait_for(lambda d: "configuration reloaded" in d.logs())
        time.sleep(2.0)
        reloads = daemon.logs().count("configuration reloaded")
        assert 1 <= reloads <= 5, reloads
        assert daemon.get("/healthz").status_code == 200
        daemon.wait_for(lambda d: _scrapes(d) >= before + 3)
    finally:
        daemon.stop()


def test_a_ten_megabyte_config_is_read_off_the_loop_while_scrapes_go_on(
    servers: SimFleet, tmp_path
):
    """A reload of a huge file (a long comment) is parsed in a worker thread: the target keeps
    being scraped while it is read, and the reload then applies."""
    config = {**FAST, "targets": [{"url": servers.urls[0]}]}
    daemon = DaemonProcess(tmp_path, config).start()
    try:
        assert daemon.proc is not None
        daemon.wait_for(lambda d: _scrapes(d) > 0)
        text = daemon.config_path.read_text()
        daemon.config_path.write_text(text + "# " + "x" * 10_000_000 + "\n")
        before = _scrapes(daemon)
        daemon.proc.send_signal(signal.SIGHUP)
        daemon.wait_for(lambda d: "configuration reloaded" in d.logs(), timeout=60)
        assert _scrapes(daemon) >= before + 2  # scraped while the file was read
    finally:
        daemon.stop()
