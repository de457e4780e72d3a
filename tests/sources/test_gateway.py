"""SGLang Model Gateway's `/engine_metrics` as a source: one scrape, one target per worker.

`fixtures/sglang/gateway/engine_metrics.prom` is the page in the gateway's own format, rebuilt by
`make_fixture.py` beside it after `sgl-model-gateway/src/core/metrics_aggregator.rs`
(":" replaced by "_", `worker_addr` added in sorted label position, families merged by name).
Served by real HTTP servers on 127.0.0.1.
"""

import asyncio
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from sglang_tuner.config.settings import Settings
from sglang_tuner.config.target_settings import TargetSettings
from sglang_tuner.loop.tuner import Tuner
from sglang_tuner.model.advice import NoData
from sglang_tuner.model.signals import NUM_RUNNING_REQS
from sglang_tuner.model.target_spec import TargetSpec, TargetTLS
from sglang_tuner.sources.gateway import GatewaySource, split_by_worker, worker_name
from sglang_tuner.sources.sglang import SignalMapper

from tests.conftest import FIXTURES

PAGE = (FIXTURES / "sglang" / "gateway" / "engine_metrics.prom").read_text()
PREFILL, DECODE = "http://10.0.1.5:30000", "http://10.0.1.6:30000"
SERVER_INFO = FIXTURES / "sglang" / "server_info"


class _Server:
    """A 127.0.0.1 HTTP server answering GETs from `pages` (path -> body; absent: 404)."""

    def __init__(self, pages: dict[str, Callable[[], bytes]]) -> None:
        self.pages = pages
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                del args

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                page = outer.pages.get(self.path)
                body = page() if page else b"not found"
                self.send_response(200 if page else 404)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.http.server_port}"

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture
def serve() -> Iterator[Callable[[dict[str, Callable[[], bytes]]], _Server]]:
    servers: list[_Server] = []

    def start(pages: dict[str, Callable[[], bytes]]) -> _Server:
        servers.append(_Server(pages))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def _without_lines(text: str, mark: str) -> str:
    return "\n".join(line for line in text.splitlines() if mark not in line)


def _running(page: bytes) -> float | None:
    return SignalMapper().update(page, 0.0).get(NUM_RUNNING_REQS)


def test_split_by_worker_gives_each_worker_its_own_page_without_worker_addr():
    pages = split_by_worker(PAGE.encode())
    assert set(pages) == {PREFILL, DECODE}
    assert b"worker_addr" not in pages[PREFILL] + pages[DECODE]
    assert _running(pages[PREFILL]) == 7.0 and _running(pages[DECODE]) == 180.0
    # each page keeps its families' HELP/TYPE, once
    assert pages[DECODE].count(b"# TYPE sglang_num_running_reqs gauge") == 1
    assert b'engine_type="decode"' in pages[DECODE]
    assert b'engine_type="prefill"' not in pages[DECODE]


def test_split_by_worker_worker_addr_first_or_only_label():
    page = (
        b"# TYPE sglang_a gauge\n"
        b'sglang_a{worker_addr="http://h:1",tp_rank="0"} 1\n'
        b'sglang_a{worker_addr="http://h:1"} 2\n'
    )
    assert split_by_worker(page)["http://h:1"] == (
        b'# TYPE sglang_a gauge\nsglang_a{tp_rank="0"} 1\nsglang_a 2\n'
    )


def test_worker_name_is_gateway_slash_host_port():
    assert worker_name("pd-gw", "http://10.0.1.5:30000") == "pd-gw/10.0.1.5:30000"


async def test_gateway_source_one_scrape_one_result_per_worker_then_follows_the_page(serve):
    page = [PAGE.encode()]
    gateway = serve({"/engine_metrics": lambda: page[0]})
    source = GatewaySource(TargetSpec("gw", gateway.url, labels={"pool": "a"}, gateway=True))
    try:
        results = await source.scrape(10.0, timeout_seconds=2.0, max_body_bytes=1 << 22)
        prefill, decode = worker_name("gw", PREFILL), worker_name("gw", DECODE)
        assert set(results) == {prefill, decode} == source.names
        snapshot = results[decode].snapshot
        assert snapshot is not None and snapshot.values[NUM_RUNNING_REQS] == 180.0
        spec = source.spec_of(prefill)
        assert (spec.url, spec.labels, spec.gateway) == (PREFILL, {"pool": "a"}, False)

        page[0] = _without_lines(PAGE, "10.0.1.5").encode()
        results = await source.scrape(15.0, timeout_seconds=2.0, max_body_bytes=1 << 22)
        assert set(results) == {decode} and source.gone == {prefill}

        page[0] = b""  # no worker listed: the known one is down, with the reason
        results = await source.scrape(20.0, timeout_seconds=2.0, max_body_bytes=1 << 22)
        assert results[decode].error_reason == "no_sglang_metrics"
    finally:
        await source.aclose()


async def test_gateway_source_failing_before_any_worker_shows_as_the_page_target(serve):
    gateway = serve({})  # 404 on /engine_metrics: an sgl-router without it, or a wrong URL
    source = GatewaySource(TargetSpec("gw", gateway.url, gateway=True))
    try:
        results = await source.scrape(1.0, timeout_seconds=2.0, max_body_bytes=1 << 20)
    finally:
        await source.aclose()
    assert list(results) == ["gw/engine_metrics"] and results["gw/engine_metrics"].error


async def test_tuner_gateway_target_watches_each_pd_worker_with_its_role(serve, tmp_path: Path):
    prefill = serve({"/server_info": (SERVER_INFO / "v0.5.23_pd_prefill.json").read_bytes})
    decode = serve({"/server_info": (SERVER_INFO / "v0.5.23_pd_decode.json").read_bytes})
    page = [PAGE.replace(PREFILL, prefill.url).replace(DECODE, decode.url).encode()]
    gateway = serve({"/engine_metrics": lambda: page[0]})
    target = TargetSettings(url=gateway.url, name="pd-gw", source="gateway")
    settings = Settings(
        targets=[target], database=tmp_path / "tuner.db", evaluation_interval_seconds=5.0
    )
    clock = [1000.0]
    tuner = Tuner(settings, clock=lambda: clock[0])
    await tuner.start(scheduled=False)
    names = {worker_name("pd-gw", prefill.url), worker_name("pd-gw", decode.url)}
    try:
        for _ in range(3):
            await tuner.tick()
            clock[0] += 5.0
        servers = tuner.watch.servers
        assert set(servers) == names and "pd-gw" not in servers
        p_name = worker_name("pd-gw", prefill.url)
        p_state, p_judgement = servers[p_name].state, servers[p_name].judgement
        assert p_state.config is not None and p_state.config.disaggregation_mode == "prefill"
        assert p_judgement is not None
        judged = {j.rule.id: j.outcome for j in p_judgement.judgements}
        skipped = judged["cuda_graph_not_covering"]
        assert isinstance(skipped, NoData) and "this is a prefill server" in skipped.reason

        page[0] = _without_lines(page[0].decode(), prefill.url).encode()
        await tuner.tick()
        assert set(servers) == {worker_name("pd-gw", decode.url)}
    finally:
        await tuner.stop()


async def test_tuner_scheduled_gateway_scrape_loop_adds_and_reload_removes_workers(
    serve, tmp_path: Path
):
    gateway = serve({"/engine_metrics": PAGE.encode})
    target = TargetSettings(url=gateway.url, name="gw", source="gateway")
    settings = Settings(
        targets=[target],
        database=tmp_path / "tuner.db",
        scrape_interval_seconds=0.5,
        scrape_timeout_seconds=0.4,
    )
    tuner = Tuner(settings)
    await tuner.start()
    try:
        for _ in range(60):  # the gateway's own scrape loop, at most a few intervals
            if len(tuner.watch.servers) == 2:
                break
            await asyncio.sleep(0.1)
        servers = tuner.watch.servers
        assert set(servers) == {worker_name("gw", PREFILL), worker_name("gw", DECODE)}
        assert all(s.state.last is not None and s.state.last.is_up for s in servers.values())
        tuner.reload(settings.model_copy(update={"targets": []}))  # the gateway is gone
        assert not servers and not tuner.gateways
    finally:
        await tuner.stop()


def test_worker_name_never_holds_the_worker_urls_password():
    assert worker_name("gw", "http://ops:p@ss@10.0.1.5:30000") == "gw/10.0.1.5:30000"


def test_the_gateway_key_goes_to_workers_on_its_own_host_only():
    source = GatewaySource(TargetSpec("gw", "http://10.0.0.1:8080", token="k", gateway=True))
    assert source.worker_spec("a", "http://10.0.0.1:30000").token == "k"
    assert source.worker_spec("b", "http://10.0.0.2:30000").token is None
    assert source.worker_spec("c", "http://10.0.0.1.evil.example:30000").token is None


def test_the_gateway_client_certificate_goes_to_workers_on_its_own_host_only():
    tls = TargetTLS(Path("/ca.crt"), Path("/c.crt"), Path("/c.key"), "gw.internal")
    source = GatewaySource(TargetSpec("gw", "https://10.0.0.1:8080", gateway=True, tls=tls))
    assert source.worker_spec("a", "https://10.0.0.1:30000").tls == tls
    # another host is still checked against the gateway's CA, but sent no certificate
    assert source.worker_spec("b", "https://10.0.0.2:30000").tls == TargetTLS(Path("/ca.crt"))
    bare = TargetTLS(cert_file=Path("/c.crt"), key_file=Path("/c.key"))
    other = GatewaySource(TargetSpec("gw", "https://10.0.0.1:8080", gateway=True, tls=bare))
    assert other.worker_spec("b", "https://10.0.0.2:30000").tls is None  # the default checks
