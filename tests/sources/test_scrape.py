"""scrape_metrics against real HTTP servers on 127.0.0.1 (stdlib http.server in a thread)."""

import asyncio
import gzip
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from sglang_tuner.model import signals as s
from sglang_tuner.model.scrape import SCRAPE_FAILURE_REASONS, ScrapeResult
from sglang_tuner.sources.http import HttpClient
from sglang_tuner.sources.scrape import scrape_metrics
from sglang_tuner.sources.sglang import SignalMapper

PAGE = (
    Path(__file__).resolve().parent.parent / "fixtures" / "sglang" / "v0.5.17_a.prom"
).read_bytes()
SLOW_SECONDS = 3.0
SEEN_HEADERS: list[dict[str, str]] = []


class FakeSGLang(BaseHTTPRequestHandler):
    """Serves `/<behaviour>/metrics`."""

    protocol_version = "HTTP/1.0"

    def log_message(self, *args: object) -> None:
        """Quiet."""

    def do_GET(self) -> None:
        """Behave as the first path segment says."""
        SEEN_HEADERS.append(dict(self.headers))
        behaviour = self.path.strip("/").split("/")[0]
        getattr(self, f"_{behaviour}", self._ok)()

    def _send(self, code: int, body: bytes, **headers: str) -> None:
        self.send_response(code)
        for key, value in {"Content-Length": str(len(body)), **headers}.items():
            self.send_header(key.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def _ok(self) -> None:
        self._send(200, PAGE, Content_Type="text/plain; version=0.0.4; charset=utf-8")

    def _gzip(self) -> None:
        self._send(200, gzip.compress(PAGE), Content_Encoding="gzip")

    def _notfound(self) -> None:
        self._send(404, b'{"detail":"Not Found"}')

    def _error(self) -> None:
        self._send(500, b"Internal Server Error")

    def _garbage(self) -> None:
        self._send(200, b"<html><body>502 Bad Gateway</body></html>\n")

    def _foreign(self) -> None:
        self._send(200, b"# TYPE up gauge\nup 1\n")

    def _slow(self) -> None:
        time.sleep(SLOW_SECONDS)
        self._ok()

    def _huge(self) -> None:
        """50 MiB, no Content-Length (close-delimited), 1 MiB at a time."""
        self.send_response(200)
        self.end_headers()
        chunk = b"sglang:num_running_reqs 1\n" * (1024 * 1024 // 26)
        try:
            for _ in range(50):
                self.wfile.write(chunk)
        except OSError:
            pass  # the client hung up at its cap

    def _declared(self) -> None:
        """Declares 50 MiB up front."""
        self.send_response(200)
        self.send_header("Content-Length", str(50 * 1024 * 1024))
        self.end_headers()


class QuietServer(ThreadingHTTPServer):
    """Clients hanging up early (timeouts, size caps) are expected here."""

    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        """Ignore."""


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """Base URL of the fake server."""
    httpd = QuietServer(("127.0.0.1", 0), FakeSGLang)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def closed_port() -> int:
    """A port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def scrape(url: str, **kwargs: float) -> ScrapeResult:
    """One scrape with a fresh client and mapper."""
    async with HttpClient() as client:
        return await scrape_metrics(client, "t", url, SignalMapper(), 1000.0, **kwargs)  # type: ignore[arg-type]


async def test_scrape_metrics_ok_page_gives_snapshot_and_sends_plain_text_accept(
    server: str,
) -> None:
    result = await scrape(server + "/ok")
    assert result.is_up and result.error_reason is None
    assert result.snapshot is not None and result.snapshot.values[s.NUM_RUNNING_REQS] == 100.0
    assert SEEN_HEADERS[-1]["Accept"] == "text/plain;version=0.0.4"


async def test_scrape_metrics_gzip_body_is_decoded(server: str) -> None:
    result = await scrape(server + "/gzip")
    assert result.snapshot is not None and result.snapshot.values[s.TOKEN_USAGE] == 0.8
    assert "gzip" in SEEN_HEADERS[-1]["Accept-Encoding"]


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/notfound", "http_404_metrics_disabled"),
        ("/error", "http_5xx"),
        ("/garbage", "parse"),
        ("/foreign", "no_sglang_metrics"),
        ("/huge", "body_too_large"),
        ("/declared", "body_too_large"),
    ],
)
async def test_scrape_metrics_failure_reason_for_bad_target(
    server: str, path: str, reason: str
) -> None:
    result = await scrape(server + path)
    assert not result.is_up
    assert result.error_reason == reason and reason in SCRAPE_FAILURE_REASONS
    assert result.error is not None and "\n" not in result.error


async def test_scrape_metrics_404_says_enable_metrics(server: str) -> None:
    result = await scrape(server + "/notfound")
    assert result.error is not None and "--enable-metrics" in result.error


async def test_scrape_metrics_huge_body_aborts_at_small_cap(server: str) -> None:
    result = await scrape(server + "/huge", max_body_bytes=1024 * 1024)
    assert result.error_reason == "body_too_large" and "1 MiB" in (result.error or "")


async def test_scrape_metrics_slow_target_times_out(server: str) -> None:
    result = await scrape(server + "/slow", timeout_seconds=0.3)
    assert result.error_reason == "timeout"


async def test_scrape_metrics_refused_port_is_conn_refused() -> None:
    result = await scrape(f"http://127.0.0.1:{closed_port()}")
    assert result.error_reason == "conn_refused"


async def test_scrape_metrics_unresolvable_host_is_connect_error() -> None:
    result = await scrape("http://sglang-tuner-test.invalid:30000")
    assert result.error_reason == "connect_error"


async def test_scrape_metrics_slow_target_does_not_delay_others(server: str) -> None:
    finished: list[str] = []

    async def one(client: HttpClient, name: str, url: str) -> ScrapeResult:
        result = await scrape_metrics(client, name, url, SignalMapper(), 0.0, timeout_seconds=2.0)
        finished.append(name)
        return result

    async with HttpClient() as client:
        targets = {"slow": server + "/slow", **{f"ok{i}": server + "/ok" for i in range(3)}}
        results = await asyncio.gather(*(one(client, n, u) for n, u in targets.items()))
    assert finished[-1] == "slow" and len(finished) == 4
    assert [r.is_up for r in results] == [False, True, True, True]
