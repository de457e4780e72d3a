"""Alertmanager down when the daemon starts, then down mid-run while an alert resolves: the
firing alerts arrive once it is up, the resolve once it is back, each alert once; the daemon
stays healthy and keeps scraping meanwhile. A real daemon, a real Alertmanager, simulated
SGLang servers over real HTTP."""

import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sglang_sim import ServerSpec, SimFleet

from tests.alertmanager_process import AM_BINARY, Alertmanager, Recorder
from tests.conftest import DaemonProcess

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(AM_BINARY is None, reason="prometheus-alertmanager not installed"),
]
FAST = {
    "scrape_interval_seconds": 0.5,
    "scrape_timeout_seconds": 0.4,
    "evaluation_interval_seconds": 0.5,
    "window_seconds": 10.0,
    "min_samples": 6,
    "hold_for_seconds": 0.0,
    "keep_firing_for_seconds": 0.0,
}


@pytest.fixture
def servers() -> Iterator[SimFleet]:
    specs = [ServerSpec("retraction_storm"), ServerSpec("healthy")]
    with SimFleet(specs, speed=10.0, warmup_seconds=300.0) as fleet:
        yield fleet


def _am_alerts(am: Alertmanager, target: str) -> list[dict]:  # type: ignore[type-arg]
    params = {"filter": f'target="{target}"', "active": "true"}
    return list(httpx.get(f"{am.url}/api/v2/alerts", params=params, timeout=5).json())


def _firing(daemon: DaemonProcess, target: str) -> set[str]:
    rows = daemon.get("/advice").json()["data"]
    return {a["rule"] for a in rows if a["target"] == target and a["state"] == "firing"}


def _resolved(webhook: Recorder) -> list[dict]:  # type: ignore[type-arg]
    """Resolved alerts Alertmanager notified its receiver of."""
    alerts = [a for body in webhook.bodies() for a in body["alerts"]]
    return [a for a in alerts if a["status"] == "resolved"]


def _scrapes(daemon: DaemonProcess, target: str) -> int:
    rows = daemon.get("/targets").json()["data"]
    return next(r["scrapes_total"] for r in rows if r["name"] == target)


def test_alerts_survive_an_alertmanager_down_at_start_and_mid_run(
    servers: SimFleet, tmp_path: Path, webhook: Recorder
):
    (tmp_path / "am").mkdir()
    am = Alertmanager(tmp_path / "am", webhook.url)  # not started: its port refuses
    storm, calm = servers.urls
    names = {storm: "storm", calm: "calm"}
    config = {
        **FAST,
        "targets": [{"url": u, "name": n} for u, n in names.items()],
        "alertmanager": {"urls": [am.url], "resend_delay_seconds": 2.0},
    }
    (tmp_path / "daemon").mkdir()
    daemon = DaemonProcess(tmp_path / "daemon", config).start()
    try:
        rules = daemon.wait_for(lambda d: _firing(d, "storm"), timeout=60)
        time.sleep(2)  # a few failed sends
        assert daemon.get("/healthz").status_code == 200
        failures = re.search(
            r"^sglang_tuner_alertmanager_send_failures_total\{[^}]*\} (\S+)$",
            daemon.get("/metrics").text, re.MULTILINE,
        )  # fmt: skip
        assert failures is not None and float(failures.group(1)) > 0  # it says why
        started, calm_before = time.monotonic(), _scrapes(daemon, "calm")

        am.start()  # firing alerts delivered once it is up, one per rule
        sent = daemon.wait_for(lambda _d: _am_alerts(am, "storm"), timeout=30)
        keys = [a["labels"]["alertname"] for a in sent]
        assert len(keys) == len(set(keys)) >= len(rules)

        # goes down (stopped: its notification log, which says the firing alert was notified,
        # survives; a killed one forgets that and never notifies a resolve, daemon or not)
        am.stop()
        httpx.post(f"{storm}/_sim/scenario", json={"scenario": "idle"}, timeout=5)
        daemon.wait_for(lambda d: not _firing(d, "storm"), timeout=60)
        am.start()  # back on the same storage: the resolves arrive, nothing stays active
        daemon.wait_for(lambda _d: not _am_alerts(am, "storm"), timeout=30)
        resolved = daemon.wait_for(lambda _d: _resolved(webhook), timeout=15)
        assert {a["labels"]["alertname"] for a in resolved} <= set(keys)

        # the healthy server beside them was scraped all along (>= 95 % of its schedule)
        expected = (time.monotonic() - started) / FAST["scrape_interval_seconds"]
        assert _scrapes(daemon, "calm") - calm_before >= 0.95 * expected - 2
    finally:
        daemon.stop()
        am.stop()
