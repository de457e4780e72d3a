"""A Prometheus that never answers, or answers too much, against real processes: `check
--prometheus` fails within its timeout (it once waited over 15 minutes), the daemon in
Prometheus mode is not ready and says why (it said ready with 0 targets), and an answer over
`max_answer_bytes` fails its query instead of being read whole (one 200 MiB label once took
`check --prometheus` to 8.9 GB)."""

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.conftest import DAEMON

pytestmark = pytest.mark.integration


@pytest.fixture
def silent() -> Iterator[str]:
    """A listening socket that accepts connections, reads, and never writes a byte."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


@pytest.fixture
def flood() -> Iterator[str]:
    """A query API whose every answer is a success carrying one 2 MiB label value."""
    label = "x" * (2 * 1024 * 1024)
    series = {"metric": {"__name__": "sglang:num_running_reqs", "instance": label}}
    body = json.dumps({
        "status": "success",
        "data": {"resultType": "vector", "result": [{**series, "value": [1, "1"]}]},
    }).encode()  # fmt: skip

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            del args

        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()  # no Content-Length: read until the connection closes
            self.wfile.write(body)
            self.close_connection = True

    http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{http.server_port}"
    http.shutdown()
    http.server_close()


def _check(url: str, guard: float) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "sglang_tuner", "check", "--prometheus", url, "--since", "60",
           "--interval", "2"]  # fmt: skip
    env = {"PYTHONPATH": str(DAEMON), "PATH": "/usr/bin:/bin"}
    # `guard` only stops a hang from stalling the suite; before, this took minutes
    return subprocess.run(cmd, capture_output=True, text=True, timeout=guard, env=env)


def test_check_prometheus_against_an_api_that_never_answers_fails_with_the_reason(silent):
    done = _check(silent, guard=60)
    assert done.returncode != 0
    assert "no answer from" in done.stdout + done.stderr


def test_the_daemon_is_not_ready_while_prometheus_never_answers_and_says_why(
    silent, daemon_factory
):
    prometheus = {"url": silent, "timeout_seconds": 0.5, "backfill": False}
    config = {"prometheus": prometheus, "evaluation_interval_seconds": 1.0, "targets": []}
    daemon = daemon_factory(config)
    answer = daemon.wait_for(lambda d: (r := d.get("/readyz")).json().get("detail") and r)
    assert answer.status_code == 503
    assert answer.json()["detail"].startswith("no query to Prometheus has answered yet: ")
    assert "no answer from" in answer.json()["detail"]


def test_an_answer_over_max_answer_bytes_fails_its_query_not_the_daemon(flood, daemon_factory):
    prometheus = {"url": flood, "max_answer_bytes": 1024 * 1024, "backfill": False,
                  "timeout_seconds": 0.8}  # fmt: skip
    config = {"prometheus": prometheus, "evaluation_interval_seconds": 1.0, "targets": []}
    daemon = daemon_factory(config)
    queries = daemon.wait_for(
        lambda d: [q for q in d.get("/targets").json()["queries"] if q["error_reason"]]
    )
    assert {q["error_reason"] for q in queries} == {"too_large"}
    assert "(max_answer_bytes 1,048,576)" in queries[0]["error"]
    assert daemon.get("/healthz").status_code == 200
