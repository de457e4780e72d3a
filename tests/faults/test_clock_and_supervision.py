"""Wrong clocks and a target's own failure, against real daemon processes: the wall clock
stepped an hour ahead and back leaves evaluation and saving on their cadence (the scheduler
waited on the wall clock: a +60 s step stopped them for 61 s, +1 h and back for as long as it
was watched) and is logged once per step; an exception in one target's log source is logged
with its name and the target, and every other, goes on being scraped (the task used to end for
good, silently)."""

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sglang_sim import ServerSpec, SimFleet

from tests.conftest import DAEMON, DaemonProcess

pytestmark = pytest.mark.integration
SHIM = Path(__file__).resolve().parent / "clockshift"
FAST = {"scrape_interval_seconds": 0.5, "scrape_timeout_seconds": 0.4,
        "evaluation_interval_seconds": 0.5}  # fmt: skip


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with SimFleet([ServerSpec("healthy")], speed=10.0, warmup_seconds=60.0) as fleet:
        yield fleet.urls[0]


class SteppedDaemon(DaemonProcess):
    """A daemon whose wall clock is stepped by writing seconds to `shift_file`."""

    def __init__(self, tmp_path: Path, config: dict[str, object]) -> None:
        super().__init__(tmp_path, config)
        self.shift_file = tmp_path / "clock-shift"
        self.shift_file.write_text("0")

    def start(self, timeout: float = 20.0) -> "SteppedDaemon":
        env = {**os.environ, "PYTHONPATH": f"{SHIM}:{DAEMON}",
               "CLOCK_SHIFT_FILE": str(self.shift_file)}  # fmt: skip
        cmd = [sys.executable, "-m", "sglang_tuner", "run", "--config", str(self.config_path)]
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)  # noqa: S603
        self.wait_for(_answers, timeout=timeout)
        return self


def _answers(daemon: DaemonProcess) -> bool:
    try:
        return daemon.get("/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _evaluations(daemon: DaemonProcess) -> float:
    for family in text_string_to_metric_families(daemon.get("/metrics").text):
        if family.name == "sglang_tuner_evaluations":
            return family.samples[0].value
    raise AssertionError("no sglang_tuner_evaluations_total")


def _evaluations_over(daemon: DaemonProcess, seconds: float) -> float:
    first = _evaluations(daemon)
    time.sleep(seconds)
    return _evaluations(daemon) - first


def test_a_wall_clock_step_of_an_hour_either_way_leaves_evaluation_on_its_cadence(
    server, tmp_path: Path
):
    daemon = SteppedDaemon(tmp_path, {**FAST, "targets": [{"url": server}]}).start()
    try:
        daemon.wait_for(lambda d: _evaluations(d) >= 3)
        steady = _evaluations_over(daemon, 3.0)  # about 6 at one per 0.5 s
        for shift in ("3600", "-3600", "0"):
            daemon.shift_file.write_text(shift)
            # the next 3 s: as many evaluations as before, give or take the machine's load
            assert _evaluations_over(daemon, 3.0) >= steady / 2, (shift, steady)
        steps = [line for line in daemon.logs().splitlines() if "wall clock stepped" in line]
        assert len(steps) == 3, steps  # +1 h, -2 h, +1 h: each said once
        assert "+3600 s" in steps[0] and "-7200 s" in steps[1]
    finally:
        daemon.stop()


def test_an_exception_in_one_targets_log_is_logged_with_its_name_and_scraping_goes_on(
    server, daemon_factory, tmp_path: Path
):
    log = tmp_path / "sglang.log"
    log.write_text("")
    daemon = daemon_factory({**FAST, "targets": [
        {"url": server, "name": "gpu-1", "log_file": str(log)},
        {"url": server, "name": "gpu-2"},
    ]})  # fmt: skip
    scrapes = lambda: {t["name"]: t["scrapes_total"] for t in daemon.get("/targets").json()["data"]}  # noqa: E731
    daemon.wait_for(lambda _d: min(scrapes().values()) >= 2)
    # a number of 5,000 digits where a count should be: the log scanner raised on it
    with log.open("a") as handle:
        handle.write("[2026-01-01 00:00:00] KV cache pool is full. Retract requests. "
                     f"#retracted_reqs: {'9' * 5000}\n")  # fmt: skip
    said = daemon.wait_for(lambda d: [line for line in d.logs().splitlines()
                                      if "target gpu-1: its scrape failed" in line])  # fmt: skip
    assert "(1 in a row, 1 in all)" in said[0]
    # /targets says so beside the target, with the error, until a scrape of it works again
    shown = daemon.wait_for(lambda d: [
        t for t in d.get("/targets").json()["data"] if t["task_failures_total"] >= 1
    ])  # fmt: skip
    assert [t["name"] for t in shown] == ["gpu-1"] and "Error" in (shown[0]["task_error"] or "")
    after = scrapes()
    daemon.wait_for(lambda _d: all(scrapes()[n] >= after[n] + 3 for n in after))
