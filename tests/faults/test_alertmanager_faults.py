"""Alertmanager down when the daemon starts, then down mid-run while an alert resolves; and
Alertmanager answering slower than the daemon waits: the firing alerts arrive once it answers,
the resolve once it is back, each alert once; the daemon stays healthy and keeps scraping
meanwhile. A real daemon, a real Alertmanager, simulated SGLang servers over real HTTP."""

import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from sglang_sim import ServerSpec, SimFleet

from tests.alertmanager_process import AM_BINARY, Alertmanager, Recorder
from tests.conftest import DaemonProcess
from tests.helpers import FAST_DAEMON as FAST

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(AM_BINARY is None, reason="prometheus-alertmanager not installed"),
]


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


def _notified(webhook: Recorder, status: str) -> list[dict]:  # type: ignore[type-arg]
    """Alerts of `status` ("firing", "resolved") Alertmanager notified its receiver of."""
    alerts = [a for body in webhook.bodies() for a in body["alerts"]]
    return [a for a in alerts if a["status"] == status]


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
        # survives; a killed one forgets that and never notifies a resolve, daemon or not).
        # Stopped once it has notified the firing alert: a resolve is only notified for an
        # alert whose firing was (group_wait is 300 ms after the alerts arrive).
        daemon.wait_for(lambda _d: _notified(webhook, "firing"), timeout=15)
        time.sleep(0.5)  # the notification log records it just after the webhook answers
        am.stop()
        httpx.post(f"{storm}/_sim/scenario", json={"scenario": "idle"}, timeout=5)
        daemon.wait_for(lambda d: not _firing(d, "storm"), timeout=60)
        am.start()  # back on the same storage: the resolves arrive, nothing stays active
        daemon.wait_for(lambda _d: not _am_alerts(am, "storm"), timeout=30)
        resolved = daemon.wait_for(lambda _d: _notified(webhook, "resolved"), timeout=15)
        # a resolve only for an alert whose firing was notified (one that fired later, a hint
        # on a guessed profile say, resolves too)
        fired = {a["labels"]["alertname"] for a in _notified(webhook, "firing")}
        assert {a["labels"]["alertname"] for a in resolved} <= fired

        # the healthy server beside them was scraped all along (>= 95 % of its schedule)
        expected = (time.monotonic() - started) / FAST["scrape_interval_seconds"]
        assert _scrapes(daemon, "calm") - calm_before >= 0.95 * expected - 2
    finally:
        daemon.stop()
        am.stop()


class SlowFront:
    """Alertmanager behind a front on 127.0.0.1 that, while `delay` is set, holds every request
    that long and answers 504 without passing it on (a stuck Alertmanager behind a proxy);
    with no delay it passes requests on."""

    def __init__(self, upstream: str) -> None:
        self.upstream, self.delay, self.requests = upstream, 0.0, 0
        front = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                front.requests += 1
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if front.delay:
                    time.sleep(front.delay)
                    self.send_error(504)
                    return
                answer = httpx.post(
                    front.upstream + self.path, content=body, timeout=10,
                    headers={"Content-Type": self.headers.get("Content-Type", "")},
                )  # fmt: skip
                self.send_response(answer.status_code)
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            def log_message(self, *_args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _metric(daemon: DaemonProcess, name: str) -> float:
    found = re.search(rf"^{name}(?:\{{[^}}]*\}})? (\S+)$", daemon.get("/metrics").text, re.M)
    return float(found.group(1)) if found else 0.0


def test_alerts_survive_an_alertmanager_answering_slower_than_the_daemon_waits(
    servers: SimFleet, tmp_path: Path, webhook: Recorder
):
    (tmp_path / "am").mkdir()
    am = Alertmanager(tmp_path / "am", webhook.url)
    am.start()
    front = SlowFront(am.url)
    front.delay = 3.0  # three times the daemon's timeout
    storm, calm = servers.urls
    config = {
        **FAST,
        "targets": [{"url": storm, "name": "storm"}, {"url": calm, "name": "calm"}],
        "alertmanager": {"urls": [front.url], "timeout_seconds": 1.0, "resend_delay_seconds": 2.0},
    }
    (tmp_path / "daemon").mkdir()
    daemon = DaemonProcess(tmp_path / "daemon", config).start()
    try:
        rules = daemon.wait_for(lambda d: _firing(d, "storm"), timeout=60)
        started, calm_before = time.monotonic(), _scrapes(daemon, "calm")
        daemon.wait_for(
            lambda d: _metric(d, "sglang_tuner_alertmanager_send_failures_total") >= 2, timeout=30
        )
        # waiting on Alertmanager never holds up the API or the scrapes
        began = time.monotonic()
        assert daemon.get("/healthz").status_code == 200
        assert time.monotonic() - began < 0.5
        expected = (time.monotonic() - started) / FAST["scrape_interval_seconds"]
        assert _scrapes(daemon, "calm") - calm_before >= 0.95 * expected - 2
        assert not _am_alerts(am, "storm")  # nothing got through yet

        front.delay = 0.0  # answering in time again: the firing alerts go out and stay sent
        daemon.wait_for(
            lambda d: _metric(d, "sglang_tuner_alertmanager_queue_length") == 0
            and _metric(d, "sglang_tuner_alertmanager_alerts_sent_total") > 0,
            timeout=30,
        )  # fmt: skip
        sent = daemon.wait_for(lambda _d: _am_alerts(am, "storm"), timeout=30)
        keys = [a["labels"]["alertname"] for a in sent]
        assert len(keys) == len(set(keys)) >= len(rules)  # resent ones deduplicated, none lost
    finally:
        daemon.stop()
        front.close()
        am.stop()
