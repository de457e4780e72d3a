"""Log sources that never slow the server or the daemon, against real daemon processes: a
writer piping into `sglang-tuner run` never waits on it, a named pipe as `log_file` blocks
nothing, and `log_file: "-"` with standard input closed starts anyway."""

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sglang_sim import ServerSpec, SimFleet

from tests.conftest import DAEMON, DaemonProcess

pytestmark = pytest.mark.integration
FAST = {"scrape_interval_seconds": 0.5, "scrape_timeout_seconds": 0.4}
DECODE = (
    "[2026-01-01 00:00:00] Decode batch, #running-req: 40, #token: 9000, token usage: 0.30, "
    "cuda graph: True, gen throughput (token/s): 800.00, #queue-req: 7\n"
)


class PipedDaemon(DaemonProcess):
    """`sglang-tuner run` with its standard input given (a pipe, or closed)."""

    def __init__(self, tmp_path: Path, config: dict[str, object], stdin: object) -> None:
        super().__init__(tmp_path, config)
        self.stdin = stdin

    def start(self, timeout: float = 20.0) -> "PipedDaemon":
        env = {**os.environ, "PYTHONPATH": str(DAEMON)}
        cmd = [sys.executable, "-m", "sglang_tuner", "run", "--config", str(self.config_path)]
        closed = self.stdin is None
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(  # noqa: S603
                cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL if closed else self.stdin,  # type: ignore[arg-type]
                preexec_fn=(lambda: os.close(0)) if closed else None,  # noqa: PLW1509
            )  # fmt: skip
        self.wait_for(lambda d: _healthy(d), timeout=timeout)
        return self


def _healthy(daemon: DaemonProcess) -> bool:
    assert daemon.proc is not None
    if daemon.proc.poll() is not None:
        raise RuntimeError(f"daemon exited: {daemon.logs()}")
    try:
        return daemon.get("/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with SimFleet([ServerSpec("healthy")], speed=10.0, warmup_seconds=60.0) as fleet:
        yield fleet.urls[0]


def _scrapes(daemon: DaemonProcess, name: str) -> int:
    return next(t["scrapes_total"] for t in daemon.get("/targets").json()["data"]
                if t["name"] == name)  # fmt: skip


def test_log_file_dash_with_standard_input_closed_starts_and_says_so(server, tmp_path: Path):
    config = {**FAST, "targets": [{"url": server, "name": "gpu-1", "log_file": "-"}]}
    daemon = PipedDaemon(tmp_path, config, stdin=None).start()
    try:
        daemon.wait_for(lambda d: _scrapes(d, "gpu-1") >= 3)
        assert "standard input is closed" in daemon.logs()
    finally:
        daemon.stop()


def test_a_writer_piping_into_the_daemon_never_waits_on_its_scrapes(server, tmp_path: Path):
    # 4 MiB of SGLang lines through a 64 KiB pipe, the daemon scraping every 10 s: read once
    # per scrape, the writer would wait some 64 scrapes (10 minutes); drained, it is done at once
    writer = subprocess.Popen(  # noqa: S603
        [sys.executable, "-c", f"import sys\nfor _ in range(30_000): sys.stdout.write({DECODE!r})"],
        stdout=subprocess.PIPE,
    )  # fmt: skip
    config = {"scrape_interval_seconds": 10.0, "scrape_timeout_seconds": 2.0,
              "targets": [{"url": server, "name": "gpu-1", "log_file": "-"}]}  # fmt: skip
    daemon = PipedDaemon(tmp_path, config, stdin=writer.stdout).start()
    try:
        assert writer.stdout is not None
        writer.stdout.close()  # the daemon holds the read end
        assert writer.wait(timeout=60) == 0  # a guard against a hang, not a timing
        target = daemon.wait_for(
            lambda d: [
                t
                for t in d.get("/targets").json()["data"]
                if t["signal_sources"].get("num_queue_reqs")
            ],  # fmt: skip
            timeout=40,
        )
        assert target[0]["name"] == "gpu-1"
    finally:
        daemon.stop()


def test_a_named_pipe_as_log_file_blocks_no_scrape_and_its_writer_finds_a_reader(
    server, daemon_factory, tmp_path: Path
):
    fifo = tmp_path / "sglang.fifo"
    os.mkfifo(fifo)
    config = {**FAST, "targets": [
        {"url": server, "name": "gpu-1", "log_file": str(fifo)},
        {"url": server, "name": "gpu-2"},
    ]}  # fmt: skip
    daemon = daemon_factory(config)
    daemon.wait_for(lambda d: _scrapes(d, "gpu-2") >= 3 and _scrapes(d, "gpu-1") >= 3)
    before = _scrapes(daemon, "gpu-2")
    time.sleep(1.0)
    assert _scrapes(daemon, "gpu-2") > before  # no writer yet: nobody waits on the open
    with fifo.open("w") as pipe:  # opens at once: the daemon waits for it off the loop
        for _ in range(20):
            pipe.write(DECODE)
            pipe.flush()
            time.sleep(0.1)
    assert daemon.get("/healthz").status_code == 200
    assert "Traceback" not in daemon.logs()
