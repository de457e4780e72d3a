"""Real components for tests: a recording HTTP server and `prometheus-alertmanager` processes.

Fixtures `webhook`, `start_alertmanager` and `alertmanager` are registered in conftest.py.
"""

import asyncio
import contextlib
import json
import shutil
import ssl
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.ports import free_port

AM_BINARY = shutil.which("prometheus-alertmanager")
needs_alertmanager = pytest.mark.skipif(
    AM_BINARY is None, reason="prometheus-alertmanager not installed (apt-get install it)"
)


# --- local HTTP servers -------------------------------------------------------------------


@dataclass
class Recorder:
    """A 127.0.0.1 HTTP server that records every POST and answers from `statuses`."""

    statuses: list[int] = field(default_factory=lambda: [200])
    requests: list[dict[str, Any]] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        """Base URL."""
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def bodies(self) -> list[Any]:
        """JSON bodies received so far."""
        return [r["body"] for r in list(self.requests)]


@contextlib.contextmanager
def serve(recorder: Recorder, tls: ssl.SSLContext | None = None) -> Iterator[Recorder]:
    """Run `recorder` in a thread (over TLS if given) for the duration of the block."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            seen = {"path": self.path, "headers": dict(self.headers), "body": json.loads(body)}
            recorder.requests.append(seen)
            status = recorder.statuses[min(len(recorder.requests), len(recorder.statuses)) - 1]
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    recorder.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls is not None:
        recorder.server.socket = tls.wrap_socket(recorder.server.socket, server_side=True)
    thread = threading.Thread(target=recorder.server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield recorder
    finally:
        recorder.server.shutdown()
        recorder.server.server_close()


# --- a real Alertmanager ------------------------------------------------------------------


@dataclass
class Alertmanager:
    """One `prometheus-alertmanager` process on 127.0.0.1, restartable on the same port/storage."""

    workdir: Path
    webhook_url: str
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """Base URL."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Launch and wait until `/-/ready` answers (the reference measured 74-179 ms)."""
        config = self.workdir / "am.yml"
        config.write_text(AM_CONFIG.format(webhook=self.webhook_url))
        args = [
            str(AM_BINARY),
            f"--config.file={config}",
            f"--storage.path={self.workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--cluster.listen-address=",
        ]
        with (self.workdir / "am.log").open("ab") as log:  # the child keeps its own copy
            self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while not _ready(self.url):
            assert self.process.poll() is None, (self.workdir / "am.log").read_text()
            assert time.monotonic() < deadline, "Alertmanager not ready after 10 s"
            time.sleep(0.02)

    def kill(self) -> None:
        """SIGKILL: an Alertmanager that dies, not one that shuts down politely."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=5)

    def stop(self) -> None:
        """SIGTERM, escalating to SIGKILL after 5 s."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()


AM_CONFIG = """
route:
  receiver: hook
  group_by: [target]
  group_wait: 300ms  # long enough that one POST's alerts land in one notification
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: hook
    webhook_configs: [{{url: "{webhook}/alert", send_resolved: true}}]
"""


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/-/ready", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture
def webhook() -> Iterator[Recorder]:
    """The Alertmanager's notification receiver."""
    with serve(Recorder()) as recorder:
        yield recorder


@pytest.fixture
def start_alertmanager(tmp_path: Path, webhook: Recorder) -> Iterator[Callable[[], Alertmanager]]:
    """Factory of running Alertmanagers (all notify `webhook`); every one is stopped after."""
    if AM_BINARY is None:
        pytest.skip("prometheus-alertmanager not installed (apt-get install it)")
    started: list[Alertmanager] = []

    def start() -> Alertmanager:
        workdir = tmp_path / f"am{len(started)}"
        workdir.mkdir()
        am = Alertmanager(workdir, webhook.url)
        started.append(am)
        am.start()
        return am

    yield start
    for am in started:
        am.stop()


@pytest.fixture
def alertmanager(start_alertmanager: Callable[[], Alertmanager]) -> Alertmanager:
    """One running Alertmanager."""
    return start_alertmanager()


# --- helpers ------------------------------------------------------------------------------


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> None:
    """Poll `check` until it holds; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


async def am_alerts(url: str, target: str = "gpu-a") -> list[dict[str, Any]]:
    """Active alerts of `target` in Alertmanager (`GET /api/v2/alerts`)."""
    async with httpx.AsyncClient() as http:
        params = {"filter": f'target="{target}"', "active": "true"}
        response = await http.get(f"{url}/api/v2/alerts", params=params)
    response.raise_for_status()
    return list(response.json())
