"""Hostile targets on a real daemon: pages that repeat series, hold NaN and infinities, inflate
from kilobytes to gigabytes, never end or trickle, and `/server_info` bodies too deep or too large.
Each fails (or is read) on its own while a simulated SGLang server next to them keeps its scrapes,
and the daemon neither crashes nor grows.
"""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import HostileHandler, HostileServer, scrape_success_ratio
from prometheus_client.parser import text_string_to_metric_families
from sglang_sim import ServerSpec, SimFleet

from tests.conftest import FIXTURES, DaemonProcess

INTERVAL = 0.5
PAGE = (FIXTURES / "sglang" / "v0.5.17_a.prom").read_bytes()  # token_usage 0.8
LABELS = (
    b'{engine_type="unified",model_name="Qwen/Qwen2.5-7B-Instruct",'
    b'moe_ep_rank="0",pp_rank="0",tp_rank="0"}'
)  # the page's token_usage series


def _duplicates(_handler: HostileHandler, endpoint: str) -> bytes:
    """The page with its token usage line repeated at another value: 0.8 + 16.65 when summed."""
    return PAGE + b"sglang:token_usage" + LABELS + b" 16.65\n" if endpoint == "metrics" else b""


def _nan_inf(_handler: HostileHandler, endpoint: str) -> bytes:
    """The page with gauges rules read at NaN, +Inf and -Inf."""
    if endpoint != "metrics":
        return b""
    page = PAGE
    for name, value in ((b"num_queue_reqs", b"+Inf"), (b"token_usage", b"NaN"),
                        (b"gen_throughput", b"-Inf"), (b"num_running_reqs", b"+Inf")):  # fmt: skip
        head = b"sglang:" + name + LABELS + b" "
        start = page.index(head) + len(head)
        page = page[:start] + value + page[page.index(b"\n", start) :]
    return page


ROUTES = {"duplicates": _duplicates, "nan_inf": _nan_inf}


class Run:
    """The daemon and its hostile targets' server."""

    def __init__(self, daemon: DaemonProcess, server: HostileServer) -> None:
        self.daemon, self.server = daemon, server
        assert daemon.proc is not None
        self.pid = daemon.proc.pid

    def target(self, name: str) -> dict[str, Any]:
        return dict(self.daemon.get(f"/targets/{name}").json())

    def metric(self, name: str, target: str) -> float | None:
        for family in text_string_to_metric_families(self.daemon.get("/metrics").text):
            for s in family.samples:
                if s.name == name and s.labels.get("target") == target:
                    return float(s.value)
        return None


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    tmp = tmp_path_factory.mktemp("hostile")
    with (
        HostileServer(ROUTES) as server,
        SimFleet([ServerSpec("healthy")], warmup_seconds=60.0) as fleet,
    ):
        targets = [{"name": "healthy", "url": fleet.urls[0]}]
        targets += [{"name": kind, "url": server.url(kind)} for kind in ROUTES]
        daemon = DaemonProcess(Path(tmp), {
            "targets": targets, "scrape_interval_seconds": INTERVAL,
            "scrape_timeout_seconds": 0.4, "evaluation_interval_seconds": 1.0,
            "window_seconds": 10.0, "min_samples": 3, "hold_for_seconds": 0.0,
        }).start()  # fmt: skip
        try:
            daemon.wait_for(lambda d: _all_scraped(d, len(targets)))
            yield Run(daemon, server)
        finally:
            daemon.stop()


def _all_scraped(daemon: DaemonProcess, count: int) -> bool:
    """Every target scraped at least once."""
    rows = daemon.get("/targets").json()["data"]
    return len(rows) == count and all(t["up"] is not None for t in rows)


def test_a_repeated_series_is_read_once_and_counted(run: Run) -> None:
    target = run.target("duplicates")
    assert target["up"] and target["signals"]["token_usage"] == 0.8  # not 17.45
    assert target["duplicate_samples_total"] >= 1
    assert (run.metric("sglang_tuner_scrape_duplicate_samples_total", "duplicates") or 0) >= 1


def test_nan_and_infinite_gauges_are_missing_values_not_evidence(run: Run) -> None:
    run.daemon.wait_for(lambda _d: run.target("nan_inf")["samples_in_window"] >= 6, timeout=20)
    target = run.target("nan_inf")
    assert target["up"] and target["error_reason"] is None
    advice = run.daemon.get("/advice", params={"target": "nan_inf"}).json()["data"]
    evidence = [a["evidence"].lower() for a in advice]
    assert not [e for e in evidence if "inf" in e or "nan" in e], evidence
    assert "token_usage" not in target["signals"] and "num_queue_reqs" not in target["signals"]


def test_the_healthy_server_keeps_its_scrapes_next_to_hostile_targets(run: Run) -> None:
    ratio = scrape_success_ratio(lambda: run.target("healthy"), 10.0, INTERVAL)
    assert ratio >= 0.95
