"""Configuration that is hostile or wrong, against real processes: a YAML error never quotes
the line it is on (a URL's password with it) in `check-config`, `run` or a reload's log;
`check-config` and `run` refuse the same host names with the same words; a target URL's
`?token=` value shows nowhere."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DAEMON, DaemonProcess

pytestmark = pytest.mark.integration
PASSWORD = "pw-in-yaml-5c2e"
TOKEN = "tok-in-url-9b1d"
BROKEN = f"targets:\n  - url: http://ops:{PASSWORD}@gpu-1:30000\n    name: [gpu-1\n"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(DAEMON)}
    cmd = [sys.executable, "-m", "sglang_tuner", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)


def test_a_yaml_error_says_where_never_what_the_line_holds(tmp_path: Path):
    config = tmp_path / "config.yml"
    config.write_text(BROKEN)
    for args in (["check-config", str(config)], ["run", "--config", str(config)]):
        done = _cli(*args)
        said = done.stdout + done.stderr
        assert done.returncode == 2, said
        assert "not valid YAML at line 4, column 1" in said
        assert PASSWORD not in said


def test_a_reload_with_a_yaml_error_logs_no_secret(tmp_path: Path):
    daemon = DaemonProcess(tmp_path, {"targets": [{"url": "http://127.0.0.1:9"}]}).start()
    try:
        daemon.config_path.write_text(BROKEN)
        assert daemon.proc is not None
        daemon.proc.send_signal(signal.SIGHUP)
        daemon.wait_for(lambda d: "not valid YAML at line 4" in d.logs())
        assert PASSWORD not in daemon.logs()
    finally:
        daemon.stop()


def test_check_config_and_run_refuse_a_host_with_an_empty_label_alike(tmp_path: Path):
    # it used to pass check-config, then end its target's scrape task at the first scrape
    config = tmp_path / "config.yml"
    config.write_text("targets:\n  - url: http://gpu-1..cluster.local:30000\n")
    said = []
    for args in (["check-config", str(config)], ["run", "--config", str(config)]):
        done = _cli(*args)
        assert done.returncode == 2
        said.append(next(line for line in done.stderr.splitlines() if "targets[0].url" in line))
    assert said[0] == said[1]
    assert "'gpu-1..cluster.local' is not a host name" in said[0]


def test_a_token_in_a_target_url_shows_nowhere(daemon_factory):
    url = f"http://127.0.0.1:9/?token={TOKEN}"
    daemon = daemon_factory({
        "scrape_interval_seconds": 0.5, "scrape_timeout_seconds": 0.4,
        "log_level": "debug", "targets": [{"url": url}],
    })  # fmt: skip
    daemon.wait_for(lambda d: d.get("/targets").json()["data"][0]["error"])
    shown = [daemon.get(p).text for p in ("/targets", "/metrics", "/advice", "/advice?format=text")]
    assert TOKEN not in "".join(shown) + daemon.logs()
    assert "token=<redacted>" in shown[0]
