"""`sglang-tuner sim` command line: --list, --help, bad names, serving and stopping."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from sglang_sim import SCENARIOS
from sglang_sim.cli import main

from tests.ports import free_port

DAEMON = str(Path(__file__).resolve().parents[2] / "daemon")


def test_list_describes_every_scenario(capsys):
    assert main(["--list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in SCENARIOS)
    assert "0.5.23" in out


def test_help_exits_zero_and_mentions_flags(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "--scenario" in out and "--speed" in out and "/_sim/scenario" in out


@pytest.mark.parametrize(
    "argv",
    [
        ["--scenario", "nope"],
        ["--version", "1.2.3"],
        ["--scenario", "healthy,bogus", "--count", "2"],
    ],
)
def test_bad_name_is_one_line_and_exit_2(argv, capsys):
    assert main([*argv, "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown" in err


def test_serves_count_servers_round_robin_and_stops_on_sigterm(tmp_path):
    port = free_port(2)
    cmd = [
        sys.executable,
        "-c",
        "import sys; from sglang_sim.cli import main; sys.exit(main(sys.argv[1:]))",
        "--scenario",
        "healthy,idle",
        "--count",
        "2",
        "--port",
        str(port),
        "--speed",
        "5",
        "--log-file",
        str(tmp_path / "sim.log"),
    ]
    env = {**os.environ, "PYTHONPATH": DAEMON}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    try:
        lines = [proc.stdout.readline().strip() for _ in range(2)]
        assert lines[0] == f"sim: http://127.0.0.1:{port} scenario=healthy version=0.5.23"
        assert lines[1].endswith("scenario=idle version=0.5.23")
        assert httpx.get(f"http://127.0.0.1:{port + 1}/health").status_code == 200
        time.sleep(0.5)
        assert httpx.get(f"http://127.0.0.1:{port}/metrics").status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    assert (tmp_path / f"sim.{port}.log").exists()
