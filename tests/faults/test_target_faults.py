"""A target flapping every second, and a target whose SGLang version changes on the same port:
no crash, the healthy target beside it keeps its scrapes, `/targets` tells the truth, the log
stays short and no advice comes from the gaps or from two versions' data mixed. A real daemon,
simulated SGLang servers over real HTTP."""

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sglang_sim import ServerSpec, SimFleet

from tests.conftest import DaemonProcess
from tests.helpers import FAST_DAEMON as FAST
from tests.ports import free_port

pytestmark = pytest.mark.integration


class Flapper:
    """A port that answers for `up_seconds` (passing requests on to `upstream`), then refuses
    connections for as long, over and over: a server flapping every second."""

    def __init__(self, upstream: str, up_seconds: float = 1.0) -> None:
        self.upstream, self.up_seconds, self.port = upstream, up_seconds, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.toggles = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "Flapper":
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        upstream = self.upstream

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                answer = httpx.get(upstream + self.path, timeout=5)
                self.send_response(answer.status_code)
                self.send_header("Content-Type", answer.headers.get("content-type", "text/plain"))
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            def log_message(self, *_args: object) -> None:
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        while not self._stop.is_set():
            server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
            server.daemon_threads = True
            serving = threading.Thread(target=server.serve_forever, daemon=True)
            serving.start()
            self._stop.wait(self.up_seconds)
            server.shutdown()
            server.server_close()  # refused from here on
            self.toggles += 2
            self._stop.wait(self.up_seconds)


@pytest.fixture
def servers() -> Iterator[SimFleet]:
    with SimFleet([ServerSpec("healthy"), ServerSpec("healthy")], speed=10.0) as fleet:
        yield fleet


def _row(daemon: DaemonProcess, name: str) -> dict[str, Any]:
    """The target's row in /targets (empty before the first evaluation)."""
    rows = daemon.get("/targets").json()["data"]
    return next((r for r in rows if r["name"] == name), {})


def _advice(daemon: DaemonProcess, name: str) -> list[dict[str, Any]]:
    return [a for a in daemon.get("/advice").json()["data"] if a["target"] == name]


def test_a_target_flapping_every_second(servers: SimFleet, tmp_path: Path) -> None:
    flapping, calm = servers.urls
    with Flapper(flapping) as flapper:
        config = {
            **FAST,
            # the simulated servers are offline batch jobs (a standing queue): said, so that no
            # other profile's rule runs as a hint and any advice would come from the gaps
            "targets": [
                {"url": flapper.url, "name": "flap", "profile": "offline"},
                {"url": calm, "name": "calm", "profile": "offline"},
            ],
        }
        daemon = DaemonProcess(tmp_path, config).start()
        try:
            daemon.wait_for(lambda d: _row(d, "calm").get("up"), timeout=20)
            started, calm_before = time.monotonic(), _row(daemon, "calm")["scrapes_total"]
            seen: set[tuple[bool, str | None]] = set()
            while flapper.toggles < 26:  # up 13 times, refused 13 times (about 30 s)
                assert time.monotonic() - started < 60
                row = _row(daemon, "flap")
                seen.add((bool(row["up"]), row["error_reason"]))
                time.sleep(0.2)
            # /targets follows it: up while it answers, refused while it does not
            assert (True, None) in seen and (False, "conn_refused") in seen
            # the healthy target beside it keeps >= 95 % of its scrapes
            expected = (time.monotonic() - started) / FAST["scrape_interval_seconds"]
            assert _row(daemon, "calm")["scrapes_total"] - calm_before >= 0.95 * expected - 2
            # each change logged until the burst (20 a minute), not a line for each of the 26
            lines = [line for line in daemon.logs().splitlines() if "target flap " in line]
            assert 0 < len(lines) <= 20
            # the gaps are not a restart nor a reason for advice: the server behind is healthy
            assert daemon.get("/changes/flap").json()["count"] == 0
            assert _advice(daemon, "flap") == []
            assert daemon.get("/healthz").status_code == 200
        finally:
            daemon.stop()


def test_a_new_sglang_version_on_the_same_port(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    config = {**FAST, "targets": [{"url": url, "name": "gpu"}]}
    daemon = DaemonProcess(tmp_path, config).start()
    try:
        old = ServerSpec("retraction_storm", version="0.4.10", port=port)
        with SimFleet([old], speed=10.0, warmup_seconds=300.0):
            daemon.wait_for(lambda d: _row(d, "gpu").get("sglang_version") == "0.4.10", timeout=20)
            fired = daemon.wait_for(lambda d: {a["rule"] for a in _advice(d, "gpu")}, timeout=60)
            assert "retractions_frequent" in fired, fired  # the 0.4 names are read
        # another version on the same port, with other metric names, up for a while already,
        # and idle: nothing in its own data calls for advice
        new = ServerSpec("idle", version="0.5.23", port=port)
        with SimFleet([new], speed=10.0, warmup_seconds=300.0):
            daemon.wait_for(lambda d: _row(d, "gpu").get("sglang_version") == "0.5.23", timeout=30)
            # the old version's samples leave with the restart: no advice from them, none made
            # up from two versions' data, no rule failing on the new names
            daemon.wait_for(lambda d: not _advice(d, "gpu"), timeout=30)
            stable_until = time.monotonic() + 5
            while time.monotonic() < stable_until:
                assert not _advice(daemon, "gpu")
                time.sleep(0.5)
            body = daemon.get("/advice").json()
            assert body["errors"] == [] and _row(daemon, "gpu")["up"]
            changes = daemon.get("/changes/gpu").json()
            assert changes["count"] >= 1  # the switch is on record as a restart
    finally:
        daemon.stop()


def _failures(daemon: DaemonProcess) -> dict[tuple[str, str], float]:
    """sglang_tuner_scrape_failures_total by (target, reason), from the daemon's /metrics."""
    return {
        (sample.labels["target"], sample.labels["reason"]): sample.value
        for family in text_string_to_metric_families(daemon.get("/metrics").text)
        if family.name == "sglang_tuner_scrape_failures"
        for sample in family.samples
        if sample.name.endswith("_total")
    }


def test_a_target_that_is_no_sglang_server_gets_its_own_diagnosis_and_no_advice(
    tmp_path: Path, misbehaving_server: str
) -> None:
    specs = [ServerSpec("metrics_disabled"), ServerSpec("healthy")]
    with SimFleet(specs, speed=10.0) as fleet:
        metrics_off, healthy = fleet.urls
        daemon = DaemonProcess(tmp_path, FAST)
        targets = [
            {"name": "metrics-off", "url": metrics_off},  # SGLang without --enable-metrics
            {"name": "wrong-path", "url": healthy + "/v1"},  # SGLang, but a typo'd path
            {"name": "nowhere", "url": misbehaving_server + "/nowhere"},  # 404 on every path
            {"name": "node", "url": misbehaving_server + "/node"},  # node_exporter
            {"name": "itself", "url": daemon.url},  # the daemon's own /metrics
        ]
        daemon.write_config({**daemon.config, "targets": targets})
        daemon.start()
        try:
            expected = {
                "metrics-off": "http_404_metrics_disabled",
                "wrong-path": "http_404",
                "nowhere": "http_404",
                "node": "not_sglang",
                "itself": "own_exporter",
            }
            # a scrape that times out on a loaded machine (0.4 s here) is a passing reason: wait
            # for each target's diagnosis of what it answers
            PASSING = (None, "timeout")  # noqa: N806
            rows = daemon.wait_for(
                lambda d: (
                    {n: r for n in expected if (r := _row(d, n)).get("error_reason")}
                    if all(_row(d, n).get("error_reason") not in PASSING for n in expected)
                    else None
                ),
                timeout=30,
            )
            assert {n: r["error_reason"] for n, r in rows.items()} == expected
            assert not any(r["up"] for r in rows.values())
            errors = {n: r["error"] for n, r in rows.items()}
            assert errors["metrics-off"] == (
                f"GET {metrics_off}/metrics returned 404 while /health answers: "
                "SGLang serves /metrics only with --enable-metrics"
            )
            for name, url in (("wrong-path", healthy + "/v1"), ("nowhere", targets[2]["url"])):
                assert errors[name] == (
                    f"GET {url}/metrics returned 404 and no SGLang endpoint answers there "
                    "(/health 404, /server_info 404, /get_server_info 404): a wrong URL? The "
                    "target URL is the SGLang server's scheme://host:port"
                )
            assert errors["node"] == (
                f"GET {misbehaving_server}/node/metrics: no SGLang metric families on this page "
                "(found node_*, go_*, promhttp_*, process_*): not an SGLang server?"
            )
            assert errors["itself"] == (
                f"GET {daemon.url}/metrics: this page is sglang-tuner's own /metrics, not an "
                "SGLang server: point the target at the SGLang server's port"
            )
            failures = _failures(daemon)
            for name, reason in expected.items():
                assert failures[(name, reason)] >= 1
                others = {r: v for (n, r), v in failures.items() if n == name and r != reason}
                assert set(others.values()) == {0.0}  # every other reason exists, at 0

            # SGLang without metrics is told to enable them; the others get no advice at all
            fired = daemon.wait_for(lambda d: {a["rule"] for a in _advice(d, "metrics-off")})
            assert fired == {"metrics_disabled"}
            time.sleep(2 * FAST["evaluation_interval_seconds"])  # judged a few times more
            for name in ("wrong-path", "nowhere", "node", "itself"):
                assert _advice(daemon, name) == [], name
                verdict = daemon.get("/advice/" + name + "/metrics_disabled").json()
                assert verdict["health"] == "no_data", verdict
                reason = f"the target URL leads to no SGLang server ({expected[name]})"
                assert verdict["no_data"]["reason"] == reason
        finally:
            daemon.stop()
