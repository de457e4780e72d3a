"""A regular log file with lines of 200 MB, against a real daemon process: the file is read in
bounded chunks in the log's own thread, each long line cut at 32 KiB and counted on `/targets`
and `/metrics`, the daemon's memory stays flat, scrapes keep going, and the lines after it are
read. The long lines are holes in a sparse file (NUL bytes the disk does not store)."""

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sglang_sim import ServerSpec, SimFleet

from tests.conftest import DaemonProcess

pytestmark = pytest.mark.integration
FAST = {"scrape_interval_seconds": 0.5, "scrape_timeout_seconds": 0.4}
LONG_LINE_BYTES = 200 * 1024 * 1024
LAUNCH = "[2026-01-01 00:00:00] server_args=ServerArgs(model_path='m', chunked_prefill_size=4096)\n"


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with SimFleet([ServerSpec("healthy")], speed=10.0, warmup_seconds=60.0) as fleet:
        yield fleet.urls[0]


def _append_long_line(path: Path, then: str) -> None:
    """A line of LONG_LINE_BYTES NUL bytes (a hole: nothing written to disk), then `then`."""
    with path.open("r+b") as log:
        end = log.seek(0, 2)
        log.seek(end + LONG_LINE_BYTES)
        log.write(b"\n" + then.encode())


def _peak_rss_mib(daemon: DaemonProcess) -> float:
    assert daemon.proc is not None
    status = Path(f"/proc/{daemon.proc.pid}/status").read_text()
    line = next(x for x in status.splitlines() if x.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def _target(daemon: DaemonProcess) -> dict[str, object]:
    return dict(daemon.get("/targets/gpu-a").json())


def _cut_metric(daemon: DaemonProcess) -> float | None:
    for line in daemon.get("/metrics").text.splitlines():
        if line.startswith('sglang_tuner_log_lines_cut_total{target="gpu-a"}'):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_log_lines_of_200_mb_are_cut_counted_and_never_held(
    server: str, daemon_factory, tmp_path: Path
):
    log = tmp_path / "sglang.log"
    log.write_text(LAUNCH)
    _append_long_line(log, LAUNCH)  # already there at start: the start-up scan passes it
    target = {"url": server, "name": "gpu-a", "log_file": str(log)}
    daemon = daemon_factory({**FAST, "targets": [target]})
    daemon.wait_for(lambda d: (_target(d)["scrapes_total"] or 0) >= 2)
    started = _target(daemon)
    assert started["log_lines_cut_total"] == 0 and started["log_lines_dropped_total"] == 0
    _append_long_line(log, "x" * 40_000 + "\n")  # one more long line, cut too
    with log.open("a") as out:
        out.write(LAUNCH)
    seen = daemon.wait_for(lambda d: _target(d)["log_lines_cut_total"] == 2 and _target(d), 60)
    time.sleep(1.0)
    later = _target(daemon)
    assert later["scrapes_total"] > seen["scrapes_total"]  # still scraping
    assert later["up"] is True and later["task_failures_total"] == 0
    assert later["log_lines_dropped_total"] == 0  # a file is read at its own pace
    assert _cut_metric(daemon) == 2.0
    # 400 MB of lines went by; whole, one would have taken 665 MiB
    assert _peak_rss_mib(daemon) < 200
