"""One target's runtime: /server_info and the DCGM exporter feed the config and the window."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from sglang_tuner.poller import TargetPoller
from sglang_tuner.signals import GPU_FB_FREE_GB, NUM_RUNNING_REQS
from sglang_tuner.sources.http import HttpClient
from sglang_tuner.targets import TargetSpec

from tests.conftest import FIXTURES

PAGES = {
    "/server_info": (FIXTURES / "sglang" / "server_info" / "v0.5.17.json", "application/json"),
    "/metrics": (FIXTURES / "sglang" / "v0.5.17_a.prom", "text/plain; version=0.0.4"),
    "/dcgm/metrics": (FIXTURES / "dcgm" / "dcgm-exporter.prom", "text/plain; version=0.0.4"),
}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        del args

    def do_GET(self) -> None:  # noqa: N802
        path, kind = PAGES.get(self.path, (None, ""))
        body = path.read_bytes() if path else b"not found"
        self.send_response(200 if path else 404)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def node():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


async def test_poller_reads_gpu_model_and_free_memory_from_dcgm(node):
    spec = TargetSpec("gpu-a", node, dcgm_url=f"{node}/dcgm")
    poller = TargetPoller(spec, window_capacity=10)
    async with HttpClient() as client:
        await poller.refresh_server_info(client, timeout=2.0)
        await poller.scrape(client, now=100.0, timeout=2.0, cap=1 << 20)
    assert poller.config is not None
    assert poller.config.gpu_model == "NVIDIA H100 80GB HBM3"
    assert poller.config.version == json.loads(PAGES["/server_info"][0].read_text())["version"]
    view = poller.window.view(now=100.0, window_seconds=60.0)
    assert view.last(GPU_FB_FREE_GB) == pytest.approx(7424 / 1024)  # the node's tightest GPU
    assert view.last(NUM_RUNNING_REQS) is not None


async def test_poller_configured_gpu_model_when_no_dcgm(node):
    spec = TargetSpec("gpu-b", node, gpu_model="NVIDIA A100-SXM4-80GB")
    poller = TargetPoller(spec, window_capacity=10)
    async with HttpClient() as client:
        await poller.refresh_server_info(client, timeout=2.0)
    assert poller.config is not None and poller.config.gpu_model == "NVIDIA A100-SXM4-80GB"
    assert poller.config_error is None
