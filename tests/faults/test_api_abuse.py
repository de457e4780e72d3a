"""The API under abuse, against a real daemon process: `POST /-/reload` off unless enabled and
rate-limited when it is (eight clients reloading in a loop once cost 54 % of the scrapes)."""

import signal
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import DaemonProcess

pytestmark = pytest.mark.integration
DEAD = {"url": "http://127.0.0.1:9", "name": "dead"}


def test_reload_by_http_is_off_by_default_and_sighup_still_reloads(tmp_path: Path):
    daemon = DaemonProcess(tmp_path, {"targets": [DEAD]}).start()
    try:
        refused = daemon.post("/-/reload")
        assert refused.status_code == 403
        assert "--web.enable-lifecycle" in refused.json()["detail"]
        daemon.write_config({**daemon.config, "targets": [DEAD, {**DEAD, "name": "dead-2"}]})
        assert daemon.proc is not None
        daemon.proc.send_signal(signal.SIGHUP)
        daemon.wait_for(lambda d: len(d.get("/targets").json()["data"]) == 2)
    finally:
        daemon.stop()


def test_reloads_by_http_are_rate_limited_and_never_overlap(tmp_path: Path):
    config = {"targets": [DEAD], "web_enable_lifecycle": True}
    daemon = DaemonProcess(tmp_path, config).start()
    codes: list[int] = []

    def reload() -> None:
        for _ in range(5):
            codes.append(httpx.post(daemon.url + "/-/reload", timeout=10).status_code)

    try:
        began = time.monotonic()
        clients = [threading.Thread(target=reload) for _ in range(8)]
        for client in clients:
            client.start()
        for client in clients:
            client.join()
        took = time.monotonic() - began
        assert len(codes) == 40 and set(codes) <= {200, 429}
        # a burst of three, then one a second over the seconds the 40 took
        assert 1 <= codes.count(200) <= 3 + took + 1, (codes, took)
        limited = daemon.post("/-/reload")
        if limited.status_code == 429:
            assert int(limited.headers["Retry-After"]) >= 1
        assert daemon.get("/healthz").status_code == 200
    finally:
        daemon.stop()


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_clients_that_never_read_metrics_hold_little_memory_and_few_answers(tmp_path: Path):
    # 1,000 targets make a page of megabytes; 150 clients ask for it and never read: each holds
    # about one 1 MiB piece (whole pages once took 5.2 GB at 300 clients), at most 64 answers
    # are in progress, the rest get 503 at once, and the probes still answer
    targets = [{"name": f"off-{i}", "url": f"http://127.0.{1 + i // 250}.{1 + i % 250}:9"}
               for i in range(1000)]  # fmt: skip
    config = {"targets": targets, "scrape_interval_seconds": 5.0, "scrape_timeout_seconds": 1.0}
    daemon = DaemonProcess(tmp_path, config).start(timeout=60)
    held: list[socket.socket] = []
    try:
        page = daemon.wait_for(lambda d: (n := len(d.get("/metrics").content)) > 2_000_000 and n)
        assert daemon.proc is not None
        before = _rss_bytes(daemon.proc.pid)
        for _ in range(150):
            conn = socket.create_connection(("127.0.0.1", daemon.port))
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            conn.sendall(b"GET /metrics HTTP/1.1\r\nHost: tuner\r\n\r\n")
            held.append(conn)
        busy = daemon.wait_for(lambda d: (r := d.get("/metrics")).status_code == 503 and r)
        assert busy.headers["Retry-After"] == "1"
        assert daemon.get("/healthz").status_code == 200
        grown = _rss_bytes(daemon.proc.pid) - before
        assert grown < 64 * 2 * 1024 * 1024, (grown, page)  # not 150 whole pages
    finally:
        for conn in held:
            conn.close()
    daemon.wait_for(lambda d: d.get("/metrics").status_code == 200)
    daemon.stop()
