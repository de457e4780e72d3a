"""Prometheus for tests: a real `prometheus` process, and a fixture server speaking its query API.

`PrometheusProcess` runs Debian's Prometheus 2.42 on 127.0.0.1 with a scrape config of our
choosing. `FakeQueryAPI` answers `/api/v1/query` and `/api/v1/query_range` from canned answers,
keyed by the query's short name, and records every request (for failures Prometheus will not
produce on demand: timeouts, partial responses, bad answers).
"""

import contextlib
import json
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest
import yaml

PROMETHEUS = shutil.which("prometheus")
needs_prometheus = pytest.mark.skipif(
    PROMETHEUS is None, reason="prometheus not installed (make system-deps)"
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PrometheusProcess:
    """`prometheus` scraping `scrape_configs`; stopped (SIGTERM) by `stop`."""

    def __init__(
        self,
        tmp: Path,
        scrape_configs: Sequence[Mapping[str, Any]],
        interval: str = "1s",
        basic_auth: tuple[str, str, str] | None = None,
    ):
        """`basic_auth`: (user, password, the password's bcrypt hash) its API asks for."""
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.auth = basic_auth[:2] if basic_auth else None
        config = {"global": {"scrape_interval": interval}, "scrape_configs": list(scrape_configs)}
        (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log = tmp / "prometheus.log"
        cmd = [
            str(PROMETHEUS), f"--config.file={tmp / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp / 'tsdb'}", f"--web.listen-address=127.0.0.1:{self.port}",
        ]  # fmt: skip
        if basic_auth:
            web = {"basic_auth_users": {basic_auth[0]: basic_auth[2]}}
            (tmp / "web.yml").write_text(yaml.safe_dump(web))
            cmd.append(f"--web.config.file={tmp / 'web.yml'}")
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result vector."""
        answer = httpx.get(
            f"{self.url}/api/v1/query", params={"query": expr}, timeout=5, auth=self.auth
        ).json()
        assert answer["status"] == "success", answer
        return list(answer["data"]["result"])

    def wait_for(self, expr: str, count: int = 1, timeout: float = 30.0) -> None:
        """Until `expr` returns at least `count` series (the first scrapes take ~5 s)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError, AssertionError, ValueError):
                if len(self.query(expr)) >= count:
                    return
            time.sleep(0.25)
        raise AssertionError(f"{expr} not seen in {timeout}s\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        """SIGTERM, then wait."""
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def vector(rows: Sequence[tuple[Mapping[str, str], float]], ts: float = 0.0) -> dict[str, Any]:
    """A successful instant-vector answer."""
    result = [{"metric": dict(labels), "value": [ts, repr(value)]} for labels, value in rows]
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


def matrix(
    rows: Sequence[tuple[Mapping[str, str], Sequence[tuple[float, float]]]],
) -> dict[str, Any]:
    """A successful range-matrix answer."""
    result = [
        {"metric": dict(labels), "values": [[ts, repr(v)] for ts, v in points]}
        for labels, points in rows
    ]
    return {"status": "success", "data": {"resultType": "matrix", "result": result}}


@dataclass
class FakeQueryAPI:
    """Answers by query name (the expression is looked up in `names`); empty vectors otherwise.

    `answers[name]` is (HTTP status, JSON body) or a float: seconds to wait before an empty answer.
    """

    names: Mapping[str, str]  # PromQL expression -> query name
    answers: dict[str, Any] = field(default_factory=dict)
    range_answers: dict[str, Any] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""

    def answer(self, path: str, params: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
        name = self.names.get(params.get("query", ""), "?")
        ranged = path.endswith("query_range")
        found = (self.range_answers if ranged else self.answers).get(name)
        if isinstance(found, int | float):
            time.sleep(found)
            found = None
        if found is None:
            empty = {"resultType": "matrix" if ranged else "vector", "result": []}
            return 200, {"status": "success", "data": empty}
        return found  # type: ignore[no-any-return]


@contextlib.contextmanager
def serve_api(api: FakeQueryAPI) -> Iterator[FakeQueryAPI]:
    """Run the fixture API in a thread for the duration of the block."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
            params = {k: v[0] for k, v in parse_qs(body).items()}
            api.requests.append({"path": self.path, "headers": dict(self.headers), **params})
            status, answer = api.answer(self.path, params)
            data = json.dumps(answer).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    api.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
