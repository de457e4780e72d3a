"""The API under abuse, against a real daemon process: `POST /-/reload` off unless enabled and
rate-limited when it is (eight clients reloading in a loop once cost 54 % of the scrapes)."""

import signal
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
