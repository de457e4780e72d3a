"""The DCGM exporter source: GPU model and free framebuffer, from a real HTTP server."""

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from sglang_tuner.model import signals as s
from sglang_tuner.sources.dcgm import GPU_MODEL, fetch_dcgm, parse_dcgm
from sglang_tuner.sources.http import HttpClient

PAGE = (
    Path(__file__).resolve().parent.parent / "fixtures" / "dcgm" / "dcgm-exporter.prom"
).read_bytes()


def test_parse_dcgm_reads_smallest_free_memory_in_gb_and_model() -> None:
    values = parse_dcgm(PAGE.decode())
    assert values == {s.GPU_FB_FREE_GB: 7.25, GPU_MODEL: "NVIDIA H100 80GB HBM3"}


def test_parse_dcgm_without_fb_free_is_empty() -> None:
    assert parse_dcgm('DCGM_FI_DEV_SM_CLOCK{gpu="0"} 1980\n') == {}


class DcgmHandler(BaseHTTPRequestHandler):
    """Serves the fixture at /metrics, 404 elsewhere."""

    def log_message(self, *args: object) -> None:
        """Quiet."""

    def do_GET(self) -> None:
        """Serve."""
        code, body = (200, PAGE) if self.path == "/metrics" else (404, b"")
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """Base URL of the fake exporter."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), DcgmHandler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize("suffix", ["", "/", "/metrics"])
async def test_fetch_dcgm_reads_exporter_with_or_without_metrics_path(
    server: str, suffix: str
) -> None:
    async with HttpClient() as client:
        values = await fetch_dcgm(client, server + suffix, timeout_seconds=2.0)
    assert values[s.GPU_FB_FREE_GB] == 7.25


async def test_fetch_dcgm_unreachable_exporter_gives_empty_result() -> None:
    async with HttpClient() as client:
        assert await fetch_dcgm(client, "http://127.0.0.1:9", timeout_seconds=1.0) == {}
