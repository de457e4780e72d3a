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
from sglang_tuner.evaluation import TunerState
from sglang_tuner.exporter.collector import TunerCollector
from sglang_tuner.model import signals as s
from sglang_tuner.model.scrape import SCRAPE_FAILURE_REASONS, ScrapeResult
from sglang_tuner.rules import ALL_RULES
from sglang_tuner.sources.http import HttpClient
from sglang_tuner.sources.scrape import scrape_metrics
from sglang_tuner.sources.sglang import SignalMapper

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
PAGE = (FIXTURES / "sglang" / "v0.5.17_a.prom").read_bytes()
NODE_PAGE = (FIXTURES / "other" / "node_exporter.prom").read_bytes()
SLOW_SECONDS = 3.0
SEEN_HEADERS: list[dict[str, str]] = []
TOKEN = "sk-test-token"


def _own_page() -> bytes:
    """sglang-tuner's own /metrics, as its exporter renders it."""
    return TunerCollector(ALL_RULES).text(TunerState().latest()).encode()


OWN_PAGE = _own_page()


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
        """A FastAPI server where nothing is SGLang's (or SGLang under a wrong path)."""
        self._send(404, b'{"detail":"Not Found"}')

    def _disabled(self) -> None:
        """SGLang without --enable-metrics: /health answers, /metrics does not."""
        if self.path.endswith("/health"):
            return self._send(200, b"")
        return self._send(404, b'{"detail":"Not Found"}')

    def _starting(self) -> None:
        """SGLang without --enable-metrics, /health not yet 200, /server_info behind a key."""
        if self.path.endswith("/health"):
            return self._send(503, b"")
        if self.path.endswith("/server_info"):
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                return self._send(401, b'{"error":"Unauthorized"}')
            return self._send(200, b'{"version": "0.5.23"}')
        return self._send(404, b'{"detail":"Not Found"}')

    def _proxy(self) -> None:
        """A reverse proxy's own 404 page for whatever it does not route."""
        self._send(404, b"<html><body><h1>404 Not Found</h1>nginx</body></html>")

    def _node(self) -> None:
        self._send(200, NODE_PAGE, Content_Type="text/plain; version=0.0.4")

    def _own(self) -> None:
        self._send(200, OWN_PAGE, Content_Type="text/plain; version=0.0.4")

    def _empty(self) -> None:
        """A just-started SGLang: no sample before its first log point."""
        self._send(200, b"")

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
        ("/notfound", "http_404"),
        ("/proxy", "http_404"),
        ("/disabled", "http_404_metrics_disabled"),
        ("/error", "http_5xx"),
        ("/garbage", "parse"),
        ("/foreign", "not_sglang"),
        ("/node", "not_sglang"),
        ("/own", "own_exporter"),
        ("/empty", "no_sglang_metrics"),
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
    result = await scrape(server + "/disabled")
    assert result.error == (
        f"GET {server}/disabled/metrics returned 404 while /health answers: "
        "SGLang serves /metrics only with --enable-metrics"
    )


async def test_scrape_metrics_404_with_the_api_key_asks_server_info(server: str) -> None:
    async with HttpClient() as client:
        keyed = await scrape_metrics(
            client, "t", server + "/starting", SignalMapper(), 1.0, token=TOKEN
        )
        keyless = await scrape_metrics(client, "t", server + "/starting", SignalMapper(), 1.0)
    assert keyed.error_reason == "http_404_metrics_disabled"
    assert keyed.error is not None and "while /server_info answers" in keyed.error
    assert TOKEN not in keyed.error
    assert keyless.error_reason == "http_404"  # /server_info 401 proves nothing


@pytest.mark.parametrize("path", ["/notfound", "/proxy"])
async def test_scrape_metrics_404_where_nothing_answers_is_a_wrong_url(
    server: str, path: str
) -> None:
    result = await scrape(server + path)
    assert result.error == (
        f"GET {server}{path}/metrics returned 404 and no SGLang endpoint answers there "
        "(/health 404, /server_info 404, /get_server_info 404): a wrong URL? The target URL is "
        "the SGLang server's scheme://host:port"
    )
    assert "--enable-metrics" not in result.error


async def test_scrape_metrics_another_exporters_page_names_its_families(server: str) -> None:
    result = await scrape(server + "/node")
    assert result.error == (
        f"GET {server}/node/metrics: no SGLang metric families on this page "
        "(found node_*, go_*, promhttp_*, process_*): not an SGLang server?"
    )


async def test_scrape_metrics_own_exporter_page_says_point_at_sglang(server: str) -> None:
    assert b"\nsglang_tuner_build_info{" in OWN_PAGE
    result = await scrape(server + "/own")
    assert result.error == (
        f"GET {server}/own/metrics: this page is sglang-tuner's own /metrics, not an SGLang "
        "server: point the target at the SGLang server's port"
    )


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
