"""One target's sources: /server_info and the DCGM exporter feed the config and the window."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from sglang_tuner.model.signals import GPU_FB_FREE_GB, NUM_RUNNING_REQS
from sglang_tuner.model.target_spec import TargetSpec
from sglang_tuner.sources.target import TargetSource
from sglang_tuner.target_state import TargetState

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
        if (
            self.headers.get("Authorization", "").startswith("Basic ")
            and "/server_info" in self.path
        ):
            self.send_error(401)  # the password is checked, and refused, only here
            return
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


async def _read_all(spec: TargetSpec) -> TargetState:
    """What the loop does for one target: /server_info, DCGM and one scrape into its state."""
    source, state = TargetSource(spec), TargetState(spec, window_capacity=10)
    try:
        if spec.dcgm_url:
            state.apply_dcgm(await source.dcgm(timeout_seconds=2.0))
        state.apply_server_info(*await source.server_info(timeout_seconds=2.0))
        result = await source.scrape(100.0, timeout_seconds=2.0, max_body_bytes=1 << 20)
        state.ingest(result, await source.poll_log(100.0))
    finally:
        await source.aclose()
    return state


async def test_target_reads_gpu_model_and_free_memory_from_dcgm(node):
    state = await _read_all(TargetSpec("gpu-a", node, dcgm_url=f"{node}/dcgm"))
    assert state.config is not None
    assert state.config.gpu_model == "NVIDIA H100 80GB HBM3"
    assert state.config.version == json.loads(PAGES["/server_info"][0].read_text())["version"]
    view = state.window.view(now=100.0, window_seconds=60.0)
    assert view.last(GPU_FB_FREE_GB) == pytest.approx(7424 / 1024)  # the node's tightest GPU
    assert view.last(NUM_RUNNING_REQS) is not None


async def test_target_configured_gpu_model_when_no_dcgm(node):
    state = await _read_all(TargetSpec("gpu-b", node, gpu_model="NVIDIA A100-SXM4-80GB"))
    assert state.config is not None and state.config.gpu_model == "NVIDIA A100-SXM4-80GB"
    assert state.config_error is None


async def test_a_password_in_the_target_url_is_sent_but_never_shown(node):
    secret_url = node.replace("http://", "http://ops:hunter2@")
    state = await _read_all(TargetSpec("gpu-c", secret_url))
    assert state.last is not None and state.last.is_up  # basic auth sent, /metrics answered
    assert state.config_error is not None and "401" in state.config_error
    assert "hunter2" not in state.config_error and "ops:" not in state.config_error
    closed = TargetSource(TargetSpec("gpu-d", "http://ops:hunter2@127.0.0.1:1"))
    try:
        result = await closed.scrape(100.0, timeout_seconds=2.0, max_body_bytes=1 << 20)
    finally:
        await closed.aclose()
    assert result.error is not None and "127.0.0.1:1" in result.error
    assert "hunter2" not in result.error


class _ChurningHandler(BaseHTTPRequestHandler):
    """A page whose label values change on every scrape (a request id in a label, say)."""

    scrapes = 0

    def log_message(self, *args: object) -> None:
        del args

    def do_GET(self) -> None:  # noqa: N802
        type(self).scrapes += 1
        body = b"".join(
            b'sglang:num_running_reqs{dp_rank="0",req="%d-%d-%s"} 1\n'
            % (self.scrapes, i, b"x" * 1000)
            for i in range(50)
        )
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


async def test_label_cache_stays_bounded_in_bytes_when_label_values_change_every_scrape():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ChurningHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    source = TargetSource(TargetSpec("churn", f"http://127.0.0.1:{server.server_port}"))
    try:
        sizes = []
        for n in range(300):  # 15 MB of label strings never seen twice
            result = await source.scrape(float(n), timeout_seconds=2.0, max_body_bytes=1 << 20)
            assert result.is_up and result.snapshot is not None
            assert result.snapshot.values[NUM_RUNNING_REQS] == 50.0
            sizes.append(source.mapper.label_cache_bytes)
    finally:
        await source.aclose()
        server.shutdown()
        server.server_close()
    assert 0 < max(sizes) <= 256 * 1024
