"""A state database that stops taking writes (a frozen disk, another process holding the file
locked), against a real daemon process: scrapes keep their cadence, `/readyz` says the save is
stuck, the saves due meanwhile are skipped and counted, and nothing is lost once it ends. The
lock is real: another SQLite connection holding an EXCLUSIVE transaction on the daemon's file.
"""

import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sglang_sim import ServerSpec, SimFleet

from tests.conftest import DaemonProcess

pytestmark = pytest.mark.integration
INTERVAL = 0.5
CONFIG = {"scrape_interval_seconds": INTERVAL, "scrape_timeout_seconds": 0.4}
LOCK_SECONDS = 4.0  # under SQLite's 5 s busy timeout: the stuck save goes through at release


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with SimFleet([ServerSpec("healthy")], speed=10.0, warmup_seconds=60.0) as fleet:
        yield fleet.urls[0]


def _hold_lock(db: Path, held: threading.Event, seconds: float) -> None:
    """Another process's view of the file: an EXCLUSIVE transaction held `seconds`."""
    conn = sqlite3.connect(db, timeout=10.0)
    conn.isolation_level = None
    conn.execute("BEGIN EXCLUSIVE")
    held.set()
    time.sleep(seconds)
    conn.execute("ROLLBACK")
    conn.close()


def _sample_times(db: Path) -> list[float]:
    with sqlite3.connect(db, timeout=10.0) as conn:
        return [ts for (ts,) in conn.execute("SELECT ts FROM samples ORDER BY ts")]


def _watch(daemon: DaemonProcess, until: float) -> tuple[list[int], list[dict[str, str]]]:
    """/targets' scrape count and /readyz, every 0.2 s until `until` (-1: no answer in 1 s)."""
    scrapes, ready = [], []
    while time.monotonic() < until:
        try:
            scrapes.append(daemon.get("/targets", timeout=1.0).json()["data"][0]["scrapes_total"])
            ready.append(daemon.get("/readyz", timeout=1.0).json())
        except httpx.TimeoutException:
            scrapes.append(-1)
        time.sleep(0.2)
    return scrapes, ready


def _skipped(daemon: DaemonProcess) -> float:
    for line in daemon.get("/metrics").text.splitlines():
        if line.startswith("sglang_tuner_database_saves_skipped_total"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_a_locked_database_stops_no_scrape_says_degraded_and_loses_nothing(
    server: str, daemon_factory, tmp_path: Path
):
    daemon = daemon_factory({**CONFIG, "targets": [{"url": server, "name": "gpu-a"}]})
    db = tmp_path / "tuner.db"
    daemon.wait_for(lambda _d: db.exists() and len(_sample_times(db)) >= 4)
    held = threading.Event()
    locker = threading.Thread(target=_hold_lock, args=(db, held, LOCK_SECONDS))
    locker.start()
    held.wait(5.0)
    locked_at = time.time()
    scrapes, ready = _watch(daemon, time.monotonic() + LOCK_SECONDS - 0.3)
    locker.join()
    # the loop never stopped: every request answered, a scrape about every interval
    assert -1 not in scrapes
    assert scrapes[-1] - scrapes[0] >= (LOCK_SECONDS - 0.5) / INTERVAL / 2
    stuck = [r for r in ready if r["status"] == "degraded"]
    assert stuck and "a save of the state database has run for" in stuck[-1]["detail"]
    daemon.wait_for(lambda d: d.get("/readyz").json()["status"] == "ready")
    assert _skipped(daemon) >= 1
    # nothing lost: the samples scraped while the file was locked reached it, without a gap
    daemon.wait_for(lambda _d: _sample_times(db)[-1] > locked_at + LOCK_SECONDS + 1)
    times = _sample_times(db)
    during = [ts for ts in times if locked_at <= ts <= locked_at + LOCK_SECONDS]
    assert len(during) >= (LOCK_SECONDS / INTERVAL) / 2
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert max(gaps) < 4 * INTERVAL
