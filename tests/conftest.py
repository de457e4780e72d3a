"""Shared test setup: the package lives under daemon/ (installed editable by `make test`)."""

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
import yaml

DAEMON = Path(__file__).resolve().parent.parent / "daemon"
if str(DAEMON) not in sys.path:
    sys.path.insert(0, str(DAEMON))


from tests.alertmanager_process import alertmanager, start_alertmanager, webhook  # noqa: E402, F401
from tests.ports import free_port  # noqa: E402, F401

FIXTURES = Path(__file__).resolve().parent / "fixtures"

# Modules that run alone, after the parallel part of `make test` (`-m serial`): they measure a
# daemon's cadence, memory or rate limits under load, kill processes by the dozen, or build the
# package in the repository's own build directories.
SERIAL = frozenset(
    {
        "tests/faults/test_api_abuse.py",
        "tests/faults/test_clock_and_supervision.py",
        "tests/faults/test_hostile_pages.py",
        "tests/faults/test_log_file_faults.py",
        "tests/faults/test_metrics_under_load.py",
        "tests/faults/test_process_faults.py",
        "tests/faults/test_scrape_limits.py",
        "tests/faults/test_slow_disk.py",
        "tests/faults/test_target_faults.py",
        "tests/loop/test_schedule.py",
        "tests/web/test_auth.py",
        "tests/test_kustomize.py",
        "tests/test_packaging.py",
        "tests/test_release.py",
    }
)


@pytest.fixture(autouse=True)
def _root_logger_restored() -> Iterator[None]:
    """The root logger's handlers and level as they were before the test: a test that runs the
    daemon's `setup_logging` in-process replaces both, and a later test in the same process
    (whichever module a worker runs next) would capture nothing below its level."""
    import logging

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:], root.level = handlers, level


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the `SERIAL` modules' tests `serial`."""
    root = Path(str(config.rootpath))
    for item in items:
        if item.path.relative_to(root).as_posix() in SERIAL:
            item.add_marker(pytest.mark.serial)


class _MisbehavingHandler(BaseHTTPRequestHandler):
    """Targets that fail in the ways real ones do; the first path part picks the behaviour."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:  # keep test output clean
        del args

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        kind = self.path.strip("/").split("/")[0]
        if kind == "slow":
            time.sleep(3.0)
            return self._send(200, b"sglang:num_queue_reqs 1\n")
        if kind == "huge":
            return self._stream_huge(50 * 1024 * 1024)
        if kind == "good":
            return self._send(200, (FIXTURES / "sglang" / "v0.5.17_a.prom").read_bytes())
        if kind == "garbage":
            return self._send(200, b"\x00\xff<html>not metrics</html>\x01" * 100)
        if kind == "missing":  # SGLang without --enable-metrics: /health answers, /metrics 404
            if self.path.rstrip("/").endswith("/health"):
                return self._send(200, b"")
            return self._send(404, b'{"detail":"Not Found"}')
        if kind == "node":  # another exporter's page
            return self._send(200, (FIXTURES / "other" / "node_exporter.prom").read_bytes())
        return self._send(404, b"Not Found")  # a wrong path: nothing answers

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _stream_huge(self, size: int) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(size))
        self.end_headers()
        chunk = b"sglang:num_queue_reqs 1\n" * 4096
        try:
            for _ in range(size // len(chunk)):
                self.wfile.write(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass


@pytest.fixture
def misbehaving_server() -> Iterator[str]:
    """A server: /good serves a real page; /slow, /huge, /garbage, /missing (SGLang without
    --enable-metrics), /node (node_exporter's page) and any other path (404) misbehave."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _MisbehavingHandler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


class DaemonProcess:
    """`sglang-tuner run` as a real subprocess (real uvicorn) with a generated config file."""

    def __init__(
        self, tmp_path: Path, config: dict[str, object], client: dict[str, object] | None = None
    ) -> None:
        self.port = free_port()
        self.config_path = tmp_path / "config.yml"
        self.config = {
            "listen_host": "127.0.0.1",
            "listen_port": self.port,
            "database": str(tmp_path / "tuner.db"),
            **config,
        }
        self.write_config(self.config)
        self.log_path = tmp_path / "daemon.log"
        # httpx options for a daemon with a web config: verify= (then https) and auth=
        self.client = client or {}
        scheme = "https" if "verify" in self.client else "http"
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def write_config(self, config: dict[str, object]) -> None:
        """Write (or rewrite, before a SIGHUP) the YAML config."""
        self.config_path.write_text(yaml.safe_dump(config))

    def start(self, timeout: float = 20.0) -> "DaemonProcess":
        env = {**os.environ, "PYTHONPATH": str(DAEMON)}
        cmd = [sys.executable, "-m", "sglang_tuner", "run", "--config", str(self.config_path)]
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daemon exited: {self.log_path.read_text()}")
            try:
                if self.get("/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError(f"daemon did not start: {self.log_path.read_text()}")

    def get(self, path: str, **kw: object) -> httpx.Response:
        return httpx.get(self.url + path, **{"timeout": 5, **self.client, **kw})  # type: ignore[arg-type]

    def post(self, path: str, **kw: object) -> httpx.Response:
        return httpx.post(self.url + path, **{"timeout": 10, **self.client, **kw})  # type: ignore[arg-type]

    def wait_for(self, predicate, timeout: float = 30.0, interval: float = 0.25):  # type: ignore[no-untyped-def]
        """Poll `predicate(self)` until it returns something truthy; fail with the log."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate(self)
            if value:
                return value
            time.sleep(interval)
        raise AssertionError(f"condition not met in {timeout}s; daemon log:\n{self.logs()[-4000:]}")

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


@pytest.fixture
def daemon_factory(tmp_path: Path) -> Iterator[object]:
    """Start `sglang-tuner run` subprocesses; all are stopped at the end of the test."""
    started: list[DaemonProcess] = []

    def start(config: dict[str, object], client: dict[str, object] | None = None) -> DaemonProcess:
        daemon = DaemonProcess(tmp_path, config, client)
        started.append(daemon)
        return daemon.start()

    yield start
    for daemon in started:
        daemon.stop()
