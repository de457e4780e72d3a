"""`sglang-tuner demo`: simulated servers, the daemon, and advice appearing on the terminal."""

import os
import selectors
import signal
import subprocess
import sys
import time

import pytest
from sglang_tuner.__main__ import main
from sglang_tuner.cli.parser import build_parser

from tests.conftest import free_port


def test_demo_shows_where_to_look_and_advice_as_it_appears(capsys):
    port = free_port()
    assert main(["demo", "--duration", "16", "--port", str(port)]) == 0
    out = capsys.readouterr().out
    assert f"curl 'http://127.0.0.1:{port}/advice?format=text'" in out
    assert f"http://127.0.0.1:{port}/docs" in out
    assert "PENDING  sim-queue_flood" in out and "queue_too_long" in out
    live, final = out.split("Final advice (GET /advice?format=text gives the same")
    assert "sim-healthy" not in live  # healthy gets no advice
    assert "5 server(s)" in final.splitlines()[2]  # every server listed, the healthy one too
    assert "== sim-healthy\nno advice: every rule that could judge it passed" in final
    assert "(as above)" not in final and "retry in" not in final


def test_demo_refuses_a_busy_port(capsys):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert main(["demo", "--duration", "1", "--port", str(port)]) == 2
    assert "is in use" in capsys.readouterr().err


@pytest.mark.parametrize(("given", "seconds"), [("90", 90.0), ("2m", 120.0), ("1m30s", 90.0)])
def test_demo_duration_takes_seconds_or_a_prometheus_duration(given: str, seconds: float):
    assert build_parser().parse_args(["demo", "--duration", given]).duration == seconds


def test_demo_runs_until_ctrl_c_by_default():
    assert build_parser().parse_args(["demo"]).duration == 0


@pytest.mark.parametrize("bad", ["-1", "soon", "nan"])
def test_demo_duration_refuses_what_is_no_duration(bad: str, capsys):
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["demo", "--duration", bad])
    assert exit_info.value.code == 2
    assert "is not a duration" in capsys.readouterr().err


def test_demo_ctrl_c_prints_the_final_advice_and_exits_0():
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "sglang_tuner", "demo", "--port", str(free_port())]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        _read_until(proc, b"Ctrl-C stops", timeout=60)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err.decode()
    assert b"Final advice" in out
    assert b"Traceback" not in err, err.decode()


def _read_until(proc: subprocess.Popen[bytes], marker: bytes, timeout: float) -> bytes:
    """Read the process's stdout until `marker` appears (it keeps running)."""
    assert proc.stdout is not None
    seen, deadline = b"", time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while marker not in seen:
            assert time.monotonic() < deadline, f"no {marker!r} in {seen[-2000:]!r}"
            if sel.select(timeout=1):
                chunk = os.read(proc.stdout.fileno(), 65536)
                assert chunk, f"exited before {marker!r}: {seen[-2000:]!r}"
                seen += chunk
    return seen
